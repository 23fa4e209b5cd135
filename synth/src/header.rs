//! The fixed header at the front of every message.
//!
//! Every frame, handshake or data, starts with this header and is padded to
//! `--msg-bytes`, so TCP can use fixed-size framing and a kernel-side observer
//! sees one socket read per message. The header carries the sender's
//! `stop_iter` so the stop agreement travels with ordinary traffic.

use thiserror::Error;

/// Identifies a cosched-synth frame ("CSYN" little-endian).
pub const MAGIC: u32 = u32::from_le_bytes(*b"CSYN");
/// Bumped whenever the layout below changes.
pub const VERSION: u8 = 1;
/// Encoded size of [`Header`]; the smallest allowed `--msg-bytes`.
pub const HEADER_LEN: usize = 40;

/// What a frame means to its receiver.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum Kind {
    /// A rank announces itself (to rank 0; for TCP also names the connector).
    Hello = 1,
    /// Rank 0 saw a hello before everyone was up.
    Ack = 2,
    /// Rank 0 saw everyone: iteration 0 may begin.
    Start = 3,
    /// Pattern traffic of ring, neighbour and all-to-all.
    Data = 4,
    /// Barrier: a rank reached the barrier.
    Arrive = 5,
    /// Barrier: rank 0 lets everyone through.
    Release = 6,
    /// Master-worker: work handed to a worker.
    Task = 7,
    /// Master-worker: a worker's answer.
    Reply = 8,
}

impl Kind {
    /// Handshake frames are counted apart from pattern traffic.
    pub fn is_handshake(self) -> bool {
        matches!(self, Kind::Hello | Kind::Ack | Kind::Start)
    }

    fn from_wire(byte: u8) -> Option<Kind> {
        Some(match byte {
            1 => Kind::Hello,
            2 => Kind::Ack,
            3 => Kind::Start,
            4 => Kind::Data,
            5 => Kind::Arrive,
            6 => Kind::Release,
            7 => Kind::Task,
            8 => Kind::Reply,
            _ => return None,
        })
    }
}

/// Decoded header fields.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    pub kind: Kind,
    /// Sender's rank.
    pub src: u32,
    /// Total frame length the sender used (header + payload).
    pub len: u32,
    /// [`job_hash`] of the sender's job name: keeps two jobs that share
    /// ports (or a stray process) from mixing their traffic.
    pub job_hash: u64,
    /// Iteration the frame belongs to (0 for handshake frames).
    pub iteration: u64,
    /// Sender's current stop iteration ([`crate::stop::NO_STOP`] = none yet).
    pub stop_iter: u64,
}

/// Why a received frame was not accepted.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum HeaderError {
    #[error("frame of {len} bytes is shorter than the {HEADER_LEN}-byte header")]
    Truncated { len: usize },
    #[error("bad magic {found:#010x}: not a cosched-synth frame")]
    BadMagic { found: u32 },
    #[error("unsupported header version {found} (this build speaks {VERSION})")]
    UnsupportedVersion { found: u8 },
    #[error("unknown message kind {found}")]
    UnknownKind { found: u8 },
    #[error("header declares {declared} bytes but the frame has {actual}")]
    LengthMismatch { declared: usize, actual: usize },
}

impl Header {
    /// Writes the header into the first [`HEADER_LEN`] bytes of `frame`.
    pub fn encode_into(&self, frame: &mut [u8]) -> Result<(), HeaderError> {
        let len = frame.len();
        let out = frame
            .get_mut(..HEADER_LEN)
            .ok_or(HeaderError::Truncated { len })?;
        out[0..4].copy_from_slice(&MAGIC.to_le_bytes());
        out[4] = VERSION;
        out[5] = self.kind as u8;
        out[6..8].fill(0);
        out[8..12].copy_from_slice(&self.src.to_le_bytes());
        out[12..16].copy_from_slice(&self.len.to_le_bytes());
        out[16..24].copy_from_slice(&self.job_hash.to_le_bytes());
        out[24..32].copy_from_slice(&self.iteration.to_le_bytes());
        out[32..40].copy_from_slice(&self.stop_iter.to_le_bytes());
        Ok(())
    }

    /// Parses a whole frame; its length must match the declared length.
    pub fn decode(frame: &[u8]) -> Result<Header, HeaderError> {
        let header = Header::decode_prefix(frame)?;
        if header.len as usize != frame.len() {
            return Err(HeaderError::LengthMismatch {
                declared: header.len as usize,
                actual: frame.len(),
            });
        }
        Ok(header)
    }

    /// Parses the first [`HEADER_LEN`] bytes without checking the frame length.
    ///
    /// TCP needs this before it can read the rest of a peer's first frame: a
    /// peer with a different `--msg-bytes` would otherwise desynchronise the
    /// stream instead of producing a clear error.
    pub fn decode_prefix(frame: &[u8]) -> Result<Header, HeaderError> {
        if frame.len() < HEADER_LEN {
            return Err(HeaderError::Truncated { len: frame.len() });
        }
        let magic = read_u32(frame, 0);
        if magic != MAGIC {
            return Err(HeaderError::BadMagic { found: magic });
        }
        if frame[4] != VERSION {
            return Err(HeaderError::UnsupportedVersion { found: frame[4] });
        }
        let kind = Kind::from_wire(frame[5]).ok_or(HeaderError::UnknownKind { found: frame[5] })?;
        Ok(Header {
            kind,
            src: read_u32(frame, 8),
            len: read_u32(frame, 12),
            job_hash: read_u64(frame, 16),
            iteration: read_u64(frame, 24),
            stop_iter: read_u64(frame, 32),
        })
    }
}

fn read_u32(frame: &[u8], at: usize) -> u32 {
    let mut bytes = [0u8; 4];
    bytes.copy_from_slice(&frame[at..at + 4]);
    u32::from_le_bytes(bytes)
}

fn read_u64(frame: &[u8], at: usize) -> u64 {
    let mut bytes = [0u8; 8];
    bytes.copy_from_slice(&frame[at..at + 8]);
    u64::from_le_bytes(bytes)
}

/// FNV-1a of the job name: stable across processes and builds, unlike
/// `std`'s randomly seeded hasher, so every rank computes the same value.
pub fn job_hash(job: &str) -> u64 {
    job.bytes().fold(0xcbf2_9ce4_8422_2325, |hash, byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL_KINDS: [Kind; 8] = [
        Kind::Hello,
        Kind::Ack,
        Kind::Start,
        Kind::Data,
        Kind::Arrive,
        Kind::Release,
        Kind::Task,
        Kind::Reply,
    ];

    fn sample(kind: Kind, len: u32) -> Header {
        Header {
            kind,
            src: 3,
            len,
            job_hash: job_hash("job"),
            iteration: 0x0102_0304_0506_0708,
            stop_iter: u64::MAX,
        }
    }

    fn encoded(header: &Header) -> Vec<u8> {
        let mut frame = vec![0xAA; header.len as usize];
        header.encode_into(&mut frame).unwrap();
        frame
    }

    #[test]
    fn every_kind_round_trips() {
        for kind in ALL_KINDS {
            let header = sample(kind, 64);
            assert_eq!(Header::decode(&encoded(&header)), Ok(header));
        }
    }

    #[test]
    fn minimal_frame_round_trips() {
        let header = sample(Kind::Data, HEADER_LEN as u32);
        assert_eq!(Header::decode(&encoded(&header)), Ok(header));
    }

    #[test]
    fn handshake_kinds_are_exactly_hello_ack_start() {
        let handshake: Vec<Kind> = ALL_KINDS.into_iter().filter(|k| k.is_handshake()).collect();
        assert_eq!(handshake, vec![Kind::Hello, Kind::Ack, Kind::Start]);
    }

    #[test]
    fn rejects_bad_magic() {
        let mut frame = encoded(&sample(Kind::Data, 64));
        frame[0] ^= 0xFF;
        assert!(matches!(
            Header::decode(&frame),
            Err(HeaderError::BadMagic { .. })
        ));
    }

    #[test]
    fn rejects_truncated_frames() {
        let frame = encoded(&sample(Kind::Data, 64));
        assert_eq!(
            Header::decode(&frame[..HEADER_LEN - 1]),
            Err(HeaderError::Truncated {
                len: HEADER_LEN - 1
            })
        );
        assert_eq!(
            Header::decode(&frame[..50]),
            Err(HeaderError::LengthMismatch {
                declared: 64,
                actual: 50
            })
        );
        let mut short = [0u8; 8];
        assert_eq!(
            sample(Kind::Data, 64).encode_into(&mut short),
            Err(HeaderError::Truncated { len: 8 })
        );
    }

    #[test]
    fn rejects_unknown_kind_and_version() {
        let mut frame = encoded(&sample(Kind::Data, 64));
        frame[5] = 0;
        assert_eq!(
            Header::decode(&frame),
            Err(HeaderError::UnknownKind { found: 0 })
        );
        let mut frame = encoded(&sample(Kind::Data, 64));
        frame[4] = VERSION + 1;
        assert_eq!(
            Header::decode(&frame),
            Err(HeaderError::UnsupportedVersion { found: VERSION + 1 })
        );
    }

    #[test]
    fn prefix_decoding_reads_the_declared_length() {
        let header = sample(Kind::Hello, 100);
        let frame = encoded(&header);
        assert_eq!(Header::decode_prefix(&frame[..HEADER_LEN]), Ok(header));
        let mut bad = frame.clone();
        bad[1] = 0;
        assert!(matches!(
            Header::decode_prefix(&bad[..HEADER_LEN]),
            Err(HeaderError::BadMagic { .. })
        ));
        assert_eq!(
            Header::decode_prefix(&frame[..10]),
            Err(HeaderError::Truncated { len: 10 })
        );
    }

    #[test]
    fn job_hash_is_fnv1a_and_separates_names() {
        // Published FNV-1a 64 test vectors.
        assert_eq!(job_hash(""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(job_hash("a"), 0xaf63_dc4c_8601_ec8c);
        assert_ne!(job_hash("job-a"), job_hash("job-b"));
    }
}
