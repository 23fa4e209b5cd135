//! The incremental frame decoder on its own: chunking, limits, end of input.

#[path = "wire_support.rs"]
mod support;

use cosched_proto::wire::{
    FrameDecoder, HEADER_LEN, Heartbeat, MAX_FRAME_LEN, Message, RawFrame, TAG_LEN, WireError,
    decode_frame,
};

/// A few valid frames back to back.
fn stream_of_frames() -> (Vec<u8>, Vec<Vec<u8>>) {
    let (mut agent, _) = support::establish();
    let frames: Vec<Vec<u8>> = support::one_of_each_message()
        .iter()
        .map(|message| agent.seal(message).unwrap())
        .collect();
    (frames.concat(), frames)
}

fn decode_all(decoder: &mut FrameDecoder, chunk: &[u8]) -> Vec<RawFrame> {
    decoder
        .push(chunk)
        .collect::<Result<Vec<_>, _>>()
        .expect("valid frames")
}

#[test]
fn whole_stream_in_one_chunk_gives_every_frame() {
    let (stream, frames) = stream_of_frames();
    let mut decoder = FrameDecoder::new();
    let decoded = decode_all(&mut decoder, &stream);
    let bytes: Vec<Vec<u8>> = decoded.iter().map(RawFrame::to_bytes).collect();
    assert_eq!(bytes, frames);
    assert!(decoder.is_idle());
    assert_eq!(decoder.finish(), Ok(()));
}

#[test]
fn one_byte_at_a_time_gives_the_same_frames() {
    let (stream, frames) = stream_of_frames();
    let mut decoder = FrameDecoder::new();
    let mut decoded = Vec::new();
    for byte in &stream {
        decoded.extend(decode_all(&mut decoder, std::slice::from_ref(byte)));
    }
    assert_eq!(decoded.len(), frames.len());
    assert_eq!(decoded.last().unwrap().to_bytes(), *frames.last().unwrap());
}

#[test]
fn decode_leaves_the_next_frames_bytes_in_the_input() {
    let (stream, frames) = stream_of_frames();
    let mut decoder = FrameDecoder::new();
    let mut input = &stream[..];
    let first = decoder.decode(&mut input).unwrap().unwrap();
    assert_eq!(first.to_bytes(), frames[0]);
    assert_eq!(input.len(), stream.len() - frames[0].len());
}

#[test]
fn decode_frame_reports_bytes_used_and_truncation() {
    let (stream, frames) = stream_of_frames();
    let (frame, used) = decode_frame(&stream).unwrap();
    assert_eq!(used, frames[0].len());
    assert_eq!(
        frame.header.payload_len as usize,
        used - HEADER_LEN - TAG_LEN
    );
    assert_eq!(
        decode_frame(&stream[..10]).unwrap_err().reason(),
        "truncated"
    );
    assert_eq!(decode_frame(&[]).unwrap_err().reason(), "truncated");
}

#[test]
fn partial_header_at_end_is_truncated() {
    let mut decoder = FrameDecoder::new();
    assert_eq!(decoder.push(b"CSCW").count(), 0);
    assert_eq!(decoder.buffered_len(), 4);
    assert!(matches!(
        decoder.finish(),
        Err(WireError::Truncated { buffered: 4, .. })
    ));
}

#[test]
fn a_huge_announced_length_reserves_nothing() {
    let (stream, _) = stream_of_frames();
    let mut header = stream[..HEADER_LEN].to_vec();
    // Just under the limit: accepted, but only the bytes that arrive are held.
    let payload_len = (MAX_FRAME_LEN - HEADER_LEN - TAG_LEN) as u32;
    header[28..32].copy_from_slice(&payload_len.to_be_bytes());
    let mut decoder = FrameDecoder::new();
    assert_eq!(decoder.push(&header).count(), 0);
    assert_eq!(decoder.push(&[0u8; 100]).count(), 0);
    assert_eq!(decoder.buffered_len(), HEADER_LEN + 100);
    assert_eq!(decoder.finish().unwrap_err().reason(), "truncated");
}

#[test]
fn a_tighter_limit_is_enforced() {
    let (mut agent, _) = support::establish();
    let frame = agent
        .seal(&Message::Heartbeat(Heartbeat { seq: 1, t1_ns: 1 }))
        .unwrap();
    let mut decoder = FrameDecoder::with_max_frame_len(frame.len() - 1);
    let results: Vec<_> = decoder.push(&frame).collect();
    assert_eq!(results.len(), 1);
    assert_eq!(results[0].as_ref().unwrap_err().reason(), "oversized");
    let mut decoder = FrameDecoder::with_max_frame_len(frame.len());
    assert_eq!(decode_all(&mut decoder, &frame).len(), 1);
}

#[test]
fn decoder_stays_failed_after_a_framing_error() {
    let mut decoder = FrameDecoder::new();
    let results: Vec<_> = decoder.push(&[0xAA; 64]).collect();
    assert_eq!(results.len(), 1, "iteration stops at the first error");
    assert_eq!(results[0].as_ref().unwrap_err().reason(), "bad_magic");
    assert_eq!(decoder.failure().unwrap().reason(), "bad_magic");
    let (stream, _) = stream_of_frames();
    let later: Vec<_> = decoder.push(&stream).collect();
    assert_eq!(later[0].as_ref().unwrap_err().reason(), "already_failed");
}

#[test]
fn a_foreign_protocol_is_rejected_as_soon_as_the_magic_is_in() {
    let mut decoder = FrameDecoder::new();
    let results: Vec<_> = decoder.push(b"GET ").collect();
    assert_eq!(results.len(), 1);
    assert_eq!(results[0], Err(WireError::BadMagic { found: *b"GET " }));
    let mut decoder = FrameDecoder::new();
    let results: Vec<_> = decoder.push(b"CSCW\x07").collect();
    assert_eq!(
        results[0].as_ref().unwrap_err().reason(),
        "unsupported_version"
    );
    let mut decoder = FrameDecoder::new();
    assert_eq!(
        decoder.push(b"CS").count(),
        0,
        "a valid prefix waits for more"
    );
}
