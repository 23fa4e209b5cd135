//! Incremental frame decoding from arbitrary byte chunks.
//!
//! The decoder holds at most one partial frame: the 32 header bytes, then
//! (after the header passed validation, including the length limit) the
//! payload and tag, grown only as bytes actually arrive. It never panics on
//! any input. After a framing error the frame boundary is lost, so the decoder
//! stays failed and every later call reports [`WireError::AlreadyFailed`].

use super::error::WireError;
use super::frame::RawFrame;
use super::header::{FrameHeader, HEADER_LEN, MAGIC, MAX_FRAME_LEN, PROTOCOL_MAJOR, TAG_LEN};

/// Most bytes reserved ahead of their arrival; a peer announcing a large frame
/// and sending nothing costs at most this much.
const MAX_RESERVE_AHEAD: usize = 64 * 1024;

/// Turns a byte stream into frames.
#[derive(Debug, Clone)]
pub struct FrameDecoder {
    max_frame_len: usize,
    header_bytes: [u8; HEADER_LEN],
    header_filled: usize,
    /// Set once the header is in and valid: the header and the payload+tag
    /// bytes received so far.
    body: Option<(FrameHeader, Vec<u8>)>,
    failed: Option<WireError>,
}

impl Default for FrameDecoder {
    fn default() -> Self {
        Self::new()
    }
}

impl FrameDecoder {
    /// A decoder that accepts frames up to [`MAX_FRAME_LEN`].
    pub fn new() -> Self {
        Self::with_max_frame_len(MAX_FRAME_LEN)
    }

    /// A decoder with a tighter frame limit (clamped to what a frame with an
    /// empty payload needs, and to [`MAX_FRAME_LEN`]).
    pub fn with_max_frame_len(max_frame_len: usize) -> Self {
        FrameDecoder {
            max_frame_len: max_frame_len.clamp(HEADER_LEN + TAG_LEN, MAX_FRAME_LEN),
            header_bytes: [0; HEADER_LEN],
            header_filled: 0,
            body: None,
            failed: None,
        }
    }

    /// Consumes bytes from the front of `input` until one frame is complete
    /// (returned) or `input` is empty (`Ok(None)`). Bytes after a returned
    /// frame stay in `input` for the next call.
    pub fn decode(&mut self, input: &mut &[u8]) -> Result<Option<RawFrame>, WireError> {
        if let Some(error) = &self.failed {
            return Err(WireError::AlreadyFailed {
                earlier: error.reject_reason(),
            });
        }
        match self.decode_inner(input) {
            Err(error) => {
                self.failed = Some(error.clone());
                Err(error)
            }
            ok => ok,
        }
    }

    /// Iterates over the frames that `chunk` completes. Drain the iterator:
    /// bytes it has not reached when dropped are not consumed.
    pub fn push<'d, 'c>(&'d mut self, chunk: &'c [u8]) -> Frames<'d, 'c> {
        Frames {
            decoder: self,
            input: chunk,
            done: false,
        }
    }

    /// Call at end of input: an error if a frame was left incomplete.
    pub fn finish(&self) -> Result<(), WireError> {
        if let Some(error) = &self.failed {
            return Err(WireError::AlreadyFailed {
                earlier: error.reject_reason(),
            });
        }
        match &self.body {
            Some((header, body)) => Err(WireError::Truncated {
                buffered: HEADER_LEN + body.len(),
                needed: usize::try_from(header.frame_len()).unwrap_or(usize::MAX),
            }),
            None if self.header_filled > 0 => Err(WireError::Truncated {
                buffered: self.header_filled,
                needed: HEADER_LEN + TAG_LEN,
            }),
            None => Ok(()),
        }
    }

    /// Whether no partial frame is buffered.
    pub fn is_idle(&self) -> bool {
        self.header_filled == 0 && self.body.is_none()
    }

    /// Bytes of the partial frame held so far.
    pub fn buffered_len(&self) -> usize {
        match &self.body {
            Some((_, body)) => HEADER_LEN + body.len(),
            None => self.header_filled,
        }
    }

    /// The error that stopped this decoder, if any.
    pub fn failure(&self) -> Option<&WireError> {
        self.failed.as_ref()
    }

    fn decode_inner(&mut self, input: &mut &[u8]) -> Result<Option<RawFrame>, WireError> {
        if self.body.is_none() {
            let wanted = HEADER_LEN - self.header_filled;
            let take = wanted.min(input.len());
            self.header_bytes[self.header_filled..self.header_filled + take]
                .copy_from_slice(&input[..take]);
            self.header_filled += take;
            *input = &input[take..];
            if self.header_filled < HEADER_LEN {
                check_header_prefix(&self.header_bytes[..self.header_filled])?;
                return Ok(None);
            }
            let header = FrameHeader::parse(&self.header_bytes, self.max_frame_len)?;
            let body_len = header.payload_len as usize + TAG_LEN;
            self.body = Some((header, Vec::with_capacity(body_len.min(MAX_RESERVE_AHEAD))));
        }
        let Some((header, body)) = &mut self.body else {
            return Ok(None);
        };
        let body_len = header.payload_len as usize + TAG_LEN;
        let take = (body_len - body.len()).min(input.len());
        body.extend_from_slice(&input[..take]);
        *input = &input[take..];
        if body.len() < body_len {
            return Ok(None);
        }
        let (header, mut payload) = self.body.take().expect("body is present");
        self.header_filled = 0;
        let mut tag = [0u8; TAG_LEN];
        tag.copy_from_slice(&payload[header.payload_len as usize..]);
        payload.truncate(header.payload_len as usize);
        Ok(Some(RawFrame {
            header,
            payload,
            tag,
        }))
    }
}

/// Rejects a stream that is plainly not ours (an HTTP probe, a TLS hello) as
/// soon as the magic or major version is in, instead of waiting for a whole
/// header that such a client may never send.
fn check_header_prefix(prefix: &[u8]) -> Result<(), WireError> {
    if prefix.len() >= MAGIC.len() && prefix[..MAGIC.len()] != MAGIC {
        let mut found = [0u8; 4];
        found.copy_from_slice(&prefix[..MAGIC.len()]);
        return Err(WireError::BadMagic { found });
    }
    if let [_, _, _, _, major, rest @ ..] = prefix
        && *major != PROTOCOL_MAJOR
    {
        return Err(WireError::UnsupportedVersion {
            major: *major,
            minor: rest.first().copied().unwrap_or(0),
        });
    }
    Ok(())
}

/// The frames a chunk completes; see [`FrameDecoder::push`]. Ends after the
/// first error, which leaves the decoder failed.
#[derive(Debug)]
pub struct Frames<'d, 'c> {
    decoder: &'d mut FrameDecoder,
    input: &'c [u8],
    done: bool,
}

impl Iterator for Frames<'_, '_> {
    type Item = Result<RawFrame, WireError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        match self.decoder.decode(&mut self.input) {
            Ok(Some(frame)) => Some(Ok(frame)),
            Ok(None) => {
                self.done = true;
                None
            }
            Err(error) => {
                self.done = true;
                Some(Err(error))
            }
        }
    }
}

/// Decodes one frame from the front of `bytes`, returning it and the number of
/// bytes it took; [`WireError::Truncated`] if `bytes` ends inside it.
pub fn decode_frame(bytes: &[u8]) -> Result<(RawFrame, usize), WireError> {
    let mut decoder = FrameDecoder::new();
    let mut rest = bytes;
    match decoder.decode(&mut rest)? {
        Some(frame) => Ok((frame, bytes.len() - rest.len())),
        None => {
            decoder.finish()?;
            // An empty input has no frame at all.
            Err(WireError::Truncated {
                buffered: 0,
                needed: HEADER_LEN + TAG_LEN,
            })
        }
    }
}
