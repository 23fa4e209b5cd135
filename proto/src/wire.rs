//! Coordinator <-> agent wire protocol: versioned, length-framed, authenticated.
//!
//! The core is pure (no sockets, no clocks): bytes go in, frames and messages
//! come out, and every malformed or unauthenticated input is a typed
//! [`WireError`] whose [`WireError::reason`] is one of a small fixed set of
//! labels ([`RejectReason::ALL`]) that the daemons log and count.
//!
//! # Frame layout
//!
//! All integers are big-endian. A frame is a 32-byte header, the payload, and
//! a 32-byte HMAC-SHA256 tag over header and payload:
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0 | 4 | magic `b"CSCW"` |
//! | 4 | 1 | protocol major version (must equal [`PROTOCOL_MAJOR`]) |
//! | 5 | 1 | protocol minor version (newer minors are accepted; see [`PROTOCOL_MINOR`]) |
//! | 6 | 2 | message kind ([`MessageKind`]) |
//! | 8 | 2 | flags (low byte: must-understand bits; high byte: ignorable) |
//! | 10 | 2 | reserved, must be zero |
//! | 12 | 8 | session id (0 on the initiator's `Hello`) |
//! | 20 | 8 | sequence number, strictly increasing per direction |
//! | 28 | 4 | payload length |
//! | 32 | n | payload: JSON of the message's fields |
//! | 32+n | 32 | HMAC-SHA256 tag over bytes `0..32+n` |
//!
//! A whole frame is at most [`MAX_FRAME_LEN`] (1 MiB); the length is checked
//! from the header before any payload memory is reserved.
//!
//! # Handshake
//!
//! The side that opens the connection (usually the agent) is the initiator:
//!
//! 1. initiator → `Hello { nonce_i, .. }`, tagged with the handshake key;
//! 2. responder → `HelloAck { nonce_i, nonce_r, proof_r, .. }`, tagged with the
//!    handshake key and carrying the new session id;
//! 3. initiator → `HelloConfirm { proof_i }`, tagged with its session key.
//!
//! Every key is derived from the shared secret by HMAC-SHA256 with a distinct
//! label; the session id, both proofs and both per-direction session keys also
//! bind both nonces, so a recorded handshake or frame is useless on any other
//! connection. Within a connection, sequence numbers must strictly increase.
//! Both sides must have different [`Role`]s, which keeps the two directions'
//! keys distinct (a frame cannot be reflected back to its sender).
//!
//! # Versions
//!
//! Both sides announce their [`ProtocolVersion`] in the handshake and put it
//! in every frame header. The major must match; a newer minor only adds
//! message kinds. A receiver refuses a kind it does not know
//! ([`WireError::UnknownKind`], the connection goes on), so a sender checks
//! [`MessageKind::known_to`] against the peer's announced version before it
//! sends a kind newer than 1.0, and falls back to what that peer understands.
//!
//! # Where things are
//!
//! - [`FrameDecoder`]: incremental, bounded decoding of byte chunks into [`RawFrame`]s.
//! - [`Session`]: the handshake and sealing/opening state machine.
//! - [`Message`]: the application messages; [`handshake`] payloads stay internal to the session.
//! - [`SharedSecret`]: the shared secret's text format.
//! - `stream` (feature `tokio`): async helpers that drive a session on a byte stream.
//! - `stamped` (feature `tokio`): when received bytes arrived (the kernel's receive stamps).

mod channel;
pub mod classes;
mod clock;
mod decoder;
mod error;
mod frame;
pub mod frame_reports;
pub mod handshake;
mod header;
mod hex;
mod keys;
mod kind;
mod mac;
mod message;
mod payload;
mod secret;
mod session;
#[cfg(feature = "tokio")]
pub mod stamped;
#[cfg(feature = "tokio")]
pub mod stream;

pub mod jobs;
pub mod leftovers;
pub mod node;
pub mod programs;
pub mod slices;

pub use channel::{Opener, Sealer};
pub use classes::{ClassSettings, DivisionClass, DivisionSwitched, SwitchDivision};
pub use clock::{ClockSample, monotonic_ns, sleep_until};
pub use decoder::{FrameDecoder, Frames, decode_frame};
pub use error::{RejectReason, WireError};
pub use frame::RawFrame;
pub use frame_reports::{
    FIRST_FRAME_SINCE_MINOR, FirstFrameAt, FrameReport, JobFrames, MOMENTS_SINCE_MINOR,
    READY_SINCE_MINOR,
};
pub use handshake::{Nonce, PeerInfo, Role};
pub use header::{
    FrameHeader, HEADER_LEN, MAGIC, MAX_FRAME_LEN, MAX_PAYLOAD_LEN, PROTOCOL_MAJOR, PROTOCOL_MINOR,
    ProtocolVersion, TAG_LEN,
};
pub use jobs::{
    CancelJob, EXPECT_OWNER_SINCE_MINOR, ExitStatus, ExpectJob, JobClass, JobExited, JobId,
    LaunchJob,
};
pub use kind::MessageKind;
pub use leftovers::{RankRef, RanksReaped, ReapRanks, ReapedRank};
pub use message::Message;
pub use node::{ErrorReport, Heartbeat, HeartbeatReply, Register, SetPolicy};
pub use programs::{CheckProgram, ProgramCheck, ProgramChecked};
pub use secret::{MAX_SECRET_LEN, MIN_SECRET_LEN, SecretError, SharedSecret};
pub use session::{Inbound, Inbounds, Session, SessionConfig, SessionState};
pub use slices::{
    JobUtilisation, MAX_SCHEDULED_SLICES, SCHEDULE_SINCE_MINOR, ScheduledSlice, SliceSchedule,
    SliceSwitched, SwitchSlice, UtilReport,
};
