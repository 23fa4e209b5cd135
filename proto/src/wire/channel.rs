//! The two directions of an established connection: [`Sealer`] tags outgoing
//! messages, [`Opener`] authenticates incoming ones.
//!
//! They are separate so a daemon can split a connection into a reading task
//! and a writing task ([`super::Session::into_split`]); each direction has its
//! own key and its own sequence numbers, so they share no state.

use super::decoder::FrameDecoder;
use super::error::WireError;
use super::frame::{RawFrame, seal_frame};
use super::kind::MessageKind;
use super::mac::TagKey;
use super::message::Message;

/// Seals outgoing messages into frames with increasing sequence numbers.
#[derive(Debug, Clone)]
pub struct Sealer {
    key: TagKey,
    session_id: u64,
    next_sequence: u64,
}

impl Sealer {
    pub(crate) fn new(key: TagKey, session_id: u64, next_sequence: u64) -> Self {
        Sealer {
            key,
            session_id,
            next_sequence,
        }
    }

    /// The frame bytes for `message`, ready to write to the stream.
    pub fn seal(&mut self, message: &Message) -> Result<Vec<u8>, WireError> {
        let payload = message.encode_payload()?;
        self.seal_raw(message.kind().code(), &payload)
    }

    /// Seals an already-encoded payload under any kind code: for kinds that a
    /// newer minor version adds before [`Message`] models them, and for tests
    /// of how peers treat kinds they do not know.
    pub fn seal_raw(&mut self, kind_code: u16, payload: &[u8]) -> Result<Vec<u8>, WireError> {
        // u64::MAX is never sent, so the peer's "strictly greater" check can
        // never be stuck at a value it must accept again.
        if self.next_sequence == u64::MAX {
            return Err(WireError::SequenceExhausted);
        }
        let frame = seal_frame(
            &self.key,
            kind_code,
            self.session_id,
            self.next_sequence,
            payload,
        )?;
        self.next_sequence += 1;
        Ok(frame)
    }

    /// The session id every frame carries.
    pub fn session_id(&self) -> u64 {
        self.session_id
    }
}

/// Decodes and authenticates incoming frames of one connection.
#[derive(Debug, Clone)]
pub struct Opener {
    key: TagKey,
    session_id: u64,
    last_sequence: u64,
    decoder: FrameDecoder,
}

impl Opener {
    pub(crate) fn new(
        key: TagKey,
        session_id: u64,
        last_sequence: u64,
        decoder: FrameDecoder,
    ) -> Self {
        Opener {
            key,
            session_id,
            last_sequence,
            decoder,
        }
    }

    /// Consumes bytes from `input` until a message is complete (returned) or
    /// `input` is empty (`Ok(None)`). After an error that is not
    /// [`WireError::is_fatal`], the offending frame has been consumed and
    /// calling again goes on with the next one.
    pub fn receive(&mut self, input: &mut &[u8]) -> Result<Option<Message>, WireError> {
        match self.decoder.decode(input)? {
            Some(frame) => self.open_frame(&frame).map(Some),
            None => Ok(None),
        }
    }

    /// Call at end of input: an error if a frame was left incomplete.
    pub fn finish(&self) -> Result<(), WireError> {
        self.decoder.finish()
    }

    /// Authenticates one frame and decodes its message.
    ///
    /// Checks, in order: session id, tag, sequence (the sequence is consumed
    /// once the tag is good), kind, payload.
    pub fn open_frame(&mut self, frame: &RawFrame) -> Result<Message, WireError> {
        let kind = self.authenticate(frame)?;
        Message::decode_payload(kind, &frame.payload)
    }

    /// The session id every frame must carry.
    pub fn session_id(&self) -> u64 {
        self.session_id
    }

    pub(crate) fn authenticate(&mut self, frame: &RawFrame) -> Result<MessageKind, WireError> {
        let header = &frame.header;
        if header.session_id != self.session_id {
            return Err(WireError::WrongSession {
                found: header.session_id,
                expected: self.session_id,
            });
        }
        if !frame.is_tagged_by(&self.key) {
            return Err(frame.bad_tag());
        }
        if header.sequence <= self.last_sequence {
            return Err(WireError::Replay {
                sequence: header.sequence,
                last: self.last_sequence,
            });
        }
        self.last_sequence = header.sequence;
        MessageKind::from_code(header.kind).ok_or(WireError::UnknownKind {
            kind: header.kind,
            major: header.version.major,
            minor: header.version.minor,
        })
    }
}
