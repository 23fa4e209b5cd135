//! Property-based fuzzing of the decoder and sessions: arbitrary bytes in
//! arbitrary chunks never panic, never yield a message, and hold bounded
//! memory; valid frames with any bytes changed are always rejected.

#[path = "wire_support.rs"]
mod support;

use cosched_proto::wire::{
    FrameDecoder, Inbound, MAGIC, MAX_FRAME_LEN, Message, PROTOCOL_MAJOR, RejectReason, Session,
    WireError,
};
use proptest::collection::vec;
use proptest::prelude::*;
use support::{agent_config, coordinator_config, establish, strategies};

/// Arbitrary bytes, half of them starting with a plausible header prefix so
/// that the length and body paths are reached too.
fn hostile_bytes() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        vec(any::<u8>(), 0..2048),
        (any::<u8>(), vec(any::<u8>(), 0..2048)).prop_map(|(minor, rest)| {
            let mut bytes = MAGIC.to_vec();
            bytes.extend([PROTOCOL_MAJOR, minor]);
            bytes.extend(rest);
            bytes
        }),
    ]
}

/// Splits `bytes` at the given (cycled) chunk lengths.
fn chunked<'b>(bytes: &'b [u8], lengths: &[usize]) -> Vec<&'b [u8]> {
    let mut chunks = Vec::new();
    let mut rest = bytes;
    for length in lengths.iter().cycle() {
        if rest.is_empty() {
            break;
        }
        let (chunk, tail) = rest.split_at((*length).min(rest.len()));
        chunks.push(chunk);
        rest = tail;
    }
    chunks
}

fn chunk_lengths() -> impl Strategy<Value = Vec<usize>> {
    vec(1usize..97, 1..16)
}

fn assert_typed(error: &WireError) {
    assert!(RejectReason::ALL.contains(&error.reject_reason()));
    assert!(!error.to_string().is_empty());
}

/// Feeds every chunk (stopping once the session fails), then ends the input.
/// Returns what came out, errors included.
fn feed(session: &mut Session, chunks: &[&[u8]]) -> Vec<Result<Inbound, WireError>> {
    let mut results = Vec::new();
    for chunk in chunks {
        results.extend(session.push(chunk));
    }
    if let Err(error) = session.finish() {
        results.push(Err(error));
    }
    results
}

fn messages_in(results: &[Result<Inbound, WireError>]) -> Vec<Message> {
    results
        .iter()
        .filter_map(|result| match result {
            Ok(Inbound::Message(message)) => Some(message.clone()),
            _ => None,
        })
        .collect()
}

/// Applies (position, mask) flips; `None` if they cancel out.
fn mutate(original: &[u8], flips: &[(usize, u8)]) -> Option<Vec<u8>> {
    let mut bytes = original.to_vec();
    for (position, mask) in flips {
        let at = position % bytes.len();
        bytes[at] ^= mask;
    }
    (bytes != original).then_some(bytes)
}

fn flips() -> impl Strategy<Value = Vec<(usize, u8)>> {
    vec((any::<usize>(), 1u8..), 1..5)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn decoder_survives_arbitrary_bytes_in_arbitrary_chunks(
        bytes in hostile_bytes(),
        lengths in chunk_lengths(),
    ) {
        let mut decoder = FrameDecoder::new();
        let mut fed = 0;
        for chunk in chunked(&bytes, &lengths) {
            fed += chunk.len();
            let results: Vec<_> = decoder.push(chunk).collect();
            for (index, result) in results.iter().enumerate() {
                if let Err(error) = result {
                    assert_typed(error);
                    prop_assert_eq!(index, results.len() - 1, "nothing after an error");
                }
            }
            prop_assert!(decoder.buffered_len() <= fed.min(MAX_FRAME_LEN));
        }
        if let Err(error) = decoder.finish() {
            assert_typed(&error);
        }
    }

    #[test]
    fn arbitrary_bytes_never_get_past_a_responder(
        bytes in hostile_bytes(),
        lengths in chunk_lengths(),
    ) {
        let mut coordinator = Session::accept(coordinator_config()).unwrap();
        let results = feed(&mut coordinator, &chunked(&bytes, &lengths));
        for result in &results {
            match result {
                Ok(inbound) => prop_assert!(false, "accepted junk: {inbound:?}"),
                Err(error) => assert_typed(error),
            }
        }
        prop_assert!(!coordinator.is_established());
    }

    #[test]
    fn arbitrary_bytes_never_yield_a_message_on_an_established_session(
        bytes in hostile_bytes(),
        lengths in chunk_lengths(),
    ) {
        let (_, mut coordinator) = establish();
        let results = feed(&mut coordinator, &chunked(&bytes, &lengths));
        prop_assert!(results.iter().all(Result::is_err));
        results.iter().filter_map(|r| r.as_ref().err()).for_each(assert_typed);
    }

    #[test]
    fn chunking_never_changes_what_arrives(
        messages in vec(strategies::message(), 1..6),
        lengths in chunk_lengths(),
    ) {
        let (mut agent, mut coordinator) = establish();
        let stream: Vec<u8> = messages
            .iter()
            .flat_map(|message| agent.seal(message).unwrap())
            .collect();
        let results = feed(&mut coordinator, &chunked(&stream, &lengths));
        prop_assert!(results.iter().all(Result::is_ok));
        prop_assert_eq!(messages_in(&results), messages);
    }

    #[test]
    fn flipped_bytes_in_a_sealed_frame_are_always_rejected(
        message in strategies::message(),
        flips in flips(),
        lengths in chunk_lengths(),
    ) {
        let (mut agent, mut coordinator) = establish();
        let frame = agent.seal(&message).unwrap();
        let Some(mutated) = mutate(&frame, &flips) else {
            return Ok(());
        };
        let results = feed(&mut coordinator, &chunked(&mutated, &lengths));
        prop_assert!(messages_in(&results).is_empty(), "accepted a mutated frame");
        prop_assert!(results.iter().any(Result::is_err));
    }

    #[test]
    fn flipped_bytes_in_handshake_frames_are_always_rejected(
        flips in flips(),
        which in 0usize..3,
    ) {
        let (mut agent, hello) = Session::initiate(agent_config()).unwrap();
        let mut coordinator = Session::accept(coordinator_config()).unwrap();
        if which == 0 {
            let Some(bytes) = mutate(&hello, &flips) else { return Ok(()) };
            let results = feed(&mut coordinator, &[&bytes]);
            prop_assert!(results.iter().all(Result::is_err));
            return Ok(());
        }
        let ack = match support::receive_one(&mut coordinator, &hello) {
            Ok(Inbound::Reply(ack)) => ack,
            other => panic!("unexpected {other:?}"),
        };
        if which == 1 {
            let Some(bytes) = mutate(&ack, &flips) else { return Ok(()) };
            let results = feed(&mut agent, &[&bytes]);
            prop_assert!(results.iter().all(Result::is_err));
            prop_assert!(!agent.is_established());
            return Ok(());
        }
        let confirm = match support::receive_one(&mut agent, &ack) {
            Ok(Inbound::Established { reply: Some(confirm), .. }) => confirm,
            other => panic!("unexpected {other:?}"),
        };
        let Some(bytes) = mutate(&confirm, &flips) else { return Ok(()) };
        let results = feed(&mut coordinator, &[&bytes]);
        prop_assert!(results.iter().all(Result::is_err));
        prop_assert!(!coordinator.is_established());
    }

    #[test]
    fn a_frame_cut_short_anywhere_is_truncated(
        message in strategies::message(),
        cut in any::<usize>(),
    ) {
        let (mut agent, mut coordinator) = establish();
        let frame = agent.seal(&message).unwrap();
        let cut = cut % frame.len();
        let results = feed(&mut coordinator, &[&frame[..cut]]);
        if cut == 0 {
            prop_assert!(results.is_empty());
        } else {
            prop_assert_eq!(results.len(), 1);
            prop_assert_eq!(results[0].as_ref().unwrap_err().reason(), "truncated");
        }
    }
}
