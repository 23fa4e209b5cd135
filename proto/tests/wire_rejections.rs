//! Each way a frame can be bad is rejected with its own reason, and the
//! connection survives exactly the rejections that leave it in sync.

#[path = "wire_support.rs"]
mod support;

use cosched_proto::wire::{
    HEADER_LEN, Heartbeat, MAX_FRAME_LEN, Message, MessageKind, RejectReason, Session,
    SessionConfig, SessionState, TAG_LEN, WireError,
};
use support::{
    coordinator_config, establish, establish_recorded, open_one, other_secret, receive_one,
};

const SEQUENCE_AT: usize = 20;
const LENGTH_AT: usize = 28;

fn heartbeat(seq: u64) -> Message {
    Message::Heartbeat(Heartbeat { seq, t1_ns: 1 })
}

/// A valid agent → coordinator frame and the coordinator to feed it to.
fn frame_for_coordinator() -> (Session, Session, Vec<u8>) {
    let (mut agent, coordinator) = establish();
    let frame = agent.seal(&heartbeat(1)).unwrap();
    (agent, coordinator, frame)
}

fn reason_of(result: Result<Message, WireError>) -> &'static str {
    result.expect_err("frame must be rejected").reason()
}

#[test]
fn tampered_payload_byte_is_a_bad_tag() {
    let (_, mut coordinator, mut frame) = frame_for_coordinator();
    frame[HEADER_LEN + 3] ^= 0x01;
    assert_eq!(reason_of(open_one(&mut coordinator, &frame)), "bad_tag");
}

#[test]
fn tampered_tag_byte_is_a_bad_tag() {
    let (_, mut coordinator, mut frame) = frame_for_coordinator();
    let last = frame.len() - 1;
    frame[last] ^= 0x80;
    assert_eq!(reason_of(open_one(&mut coordinator, &frame)), "bad_tag");
}

#[test]
fn tampered_header_fields_are_rejected() {
    // (byte offset, expected reason): authenticated fields fail the tag,
    // fields checked before the tag fail their own check.
    let cases = [
        (5, "bad_tag"), // minor version
        (7, "bad_tag"), // kind
        (8, "bad_tag"), // ignorable flag byte
        (SEQUENCE_AT + 7, "bad_tag"),
        (12, "wrong_session"), // session id
        (9, "bad_header"),     // must-understand flag byte
        (11, "bad_header"),    // reserved
    ];
    for (offset, expected) in cases {
        let (_, mut coordinator, mut frame) = frame_for_coordinator();
        frame[offset] ^= 0x01;
        assert_eq!(
            reason_of(open_one(&mut coordinator, &frame)),
            expected,
            "flipping header byte {offset}"
        );
    }
}

#[test]
fn wrong_magic_is_rejected() {
    let (_, mut coordinator, mut frame) = frame_for_coordinator();
    frame[0] = b'X';
    assert_eq!(reason_of(open_one(&mut coordinator, &frame)), "bad_magic");
}

#[test]
fn wrong_major_version_is_rejected() {
    let (_, mut coordinator, mut frame) = frame_for_coordinator();
    frame[4] = 2;
    let error = open_one(&mut coordinator, &frame).unwrap_err();
    assert_eq!(
        error,
        WireError::UnsupportedVersion {
            major: 2,
            minor: cosched_proto::wire::PROTOCOL_MINOR
        }
    );
    assert_eq!(error.reason(), "unsupported_version");
}

#[test]
fn oversized_length_is_rejected_before_the_payload_arrives() {
    let (_, mut coordinator, frame) = frame_for_coordinator();
    let mut header = frame[..HEADER_LEN].to_vec();
    header[LENGTH_AT..HEADER_LEN].copy_from_slice(&u32::MAX.to_be_bytes());
    let mut input = &header[..];
    let error = coordinator.receive(&mut input).unwrap_err();
    assert_eq!(error.reason(), "oversized");
    assert!(matches!(
        error,
        WireError::Oversized {
            max: MAX_FRAME_LEN,
            ..
        }
    ));
}

#[test]
fn truncated_frame_is_reported_at_end_of_input() {
    let (_, mut coordinator, frame) = frame_for_coordinator();
    let mut input = &frame[..frame.len() - 1];
    assert_eq!(coordinator.receive(&mut input), Ok(None));
    let error = coordinator.finish().unwrap_err();
    assert_eq!(error.reason(), "truncated");
    assert_eq!(
        error,
        WireError::Truncated {
            buffered: frame.len() - 1,
            needed: frame.len()
        }
    );
}

#[test]
fn replayed_frame_is_rejected() {
    let (_, mut coordinator, frame) = frame_for_coordinator();
    assert!(open_one(&mut coordinator, &frame).is_ok());
    let error = open_one(&mut coordinator, &frame).unwrap_err();
    assert_eq!(error.reason(), "replay");
}

#[test]
fn reordered_frames_are_rejected() {
    let (mut agent, mut coordinator) = establish();
    let first = agent.seal(&heartbeat(1)).unwrap();
    let second = agent.seal(&heartbeat(2)).unwrap();
    assert_eq!(open_one(&mut coordinator, &second), Ok(heartbeat(2)));
    assert_eq!(reason_of(open_one(&mut coordinator, &first)), "replay");
}

#[test]
fn frame_from_another_connection_is_rejected() {
    let (mut agent_one, _) = establish();
    let (_, mut coordinator_two) = establish();
    let frame = agent_one.seal(&heartbeat(1)).unwrap();
    assert_eq!(
        reason_of(open_one(&mut coordinator_two, &frame)),
        "wrong_session"
    );
}

#[test]
fn frame_reflected_to_its_sender_is_a_bad_tag() {
    let (mut agent, _) = establish();
    let frame = agent.seal(&heartbeat(1)).unwrap();
    assert_eq!(reason_of(open_one(&mut agent, &frame)), "bad_tag");
}

#[test]
fn wrong_secret_is_a_bad_tag_on_hello() {
    let mut config = support::agent_config();
    config.secret = other_secret();
    let (_, hello) = Session::initiate(config).unwrap();
    let mut coordinator = Session::accept(coordinator_config()).unwrap();
    let error = receive_one(&mut coordinator, &hello).unwrap_err();
    assert_eq!(error.reason(), "bad_tag");
    assert_eq!(
        coordinator.state(),
        SessionState::Failed(RejectReason::BadTag)
    );
}

#[test]
fn application_frame_before_handshake_is_rejected() {
    let (mut agent, _) = establish();
    let register = agent.seal(&support::one_of_each_message()[0]).unwrap();
    let mut fresh = Session::accept(coordinator_config()).unwrap();
    let error = receive_one(&mut fresh, &register).unwrap_err();
    assert_eq!(error.reason(), "not_established");
    assert_eq!(
        fresh.state(),
        SessionState::Failed(RejectReason::NotEstablished)
    );
}

#[test]
fn sending_before_handshake_is_refused_locally() {
    let (mut initiator, _) = Session::initiate(support::agent_config()).unwrap();
    let error = initiator.seal(&heartbeat(1)).unwrap_err();
    assert_eq!(error.reason(), "not_established");
}

#[test]
fn handshake_kind_after_handshake_is_unexpected() {
    let (agent, mut coordinator) = establish();
    let (mut sealer, _, _) = agent.into_split().unwrap();
    let frame = sealer
        .seal_raw(MessageKind::HelloConfirm.code(), b"{}")
        .unwrap();
    assert_eq!(
        reason_of(open_one(&mut coordinator, &frame)),
        "unexpected_message"
    );
}

#[test]
fn recorded_hello_after_handshake_is_for_another_session() {
    let (mut agent, mut coordinator, record) = establish_recorded();
    // The Hello carries session id 0, so it fails before its tag is checked.
    let error = receive_one(&mut coordinator, &record.hello).unwrap_err();
    assert_eq!(error.reason(), "wrong_session");
    let error = receive_one(&mut agent, &record.hello).unwrap_err();
    assert_eq!(error.reason(), "wrong_session");
}

#[test]
fn unknown_kind_from_a_newer_peer_is_typed_and_skippable() {
    let (agent, mut coordinator) = establish();
    let (mut sealer, _, _) = agent.into_split().unwrap();
    let frame = sealer.seal_raw(999, b"{}").unwrap();
    let error = open_one(&mut coordinator, &frame).unwrap_err();
    assert_eq!(
        error,
        WireError::UnknownKind {
            kind: 999,
            major: 1,
            minor: cosched_proto::wire::PROTOCOL_MINOR
        }
    );
    assert_eq!(error.reason(), "unknown_kind");
    assert!(!error.is_fatal());
    let next = sealer.seal(&heartbeat(2)).unwrap();
    assert_eq!(open_one(&mut coordinator, &next), Ok(heartbeat(2)));
}

#[test]
fn unknown_kind_during_handshake_fails_it() {
    let (agent, _) = establish();
    let (mut sealer, _, _) = agent.into_split().unwrap();
    let frame = sealer.seal_raw(999, b"{}").unwrap();
    let mut fresh = Session::accept(coordinator_config()).unwrap();
    assert_eq!(
        receive_one(&mut fresh, &frame).unwrap_err().reason(),
        "unknown_kind"
    );
}

#[test]
fn authenticated_but_undecodable_payload_is_a_decode_error() {
    let (agent, mut coordinator) = establish();
    let (mut sealer, _, _) = agent.into_split().unwrap();
    let frame = sealer.seal_raw(17, b"{\"seq\":\"one\"}").unwrap();
    assert_eq!(
        reason_of(open_one(&mut coordinator, &frame)),
        "payload_decode"
    );
}

#[test]
fn connection_survives_a_bad_tag_but_not_a_framing_error() {
    let (mut agent, mut coordinator) = establish();
    let mut tampered = agent.seal(&heartbeat(1)).unwrap();
    tampered[HEADER_LEN] ^= 0x20;
    assert_eq!(reason_of(open_one(&mut coordinator, &tampered)), "bad_tag");
    let good = agent.seal(&heartbeat(2)).unwrap();
    assert_eq!(open_one(&mut coordinator, &good), Ok(heartbeat(2)));

    let mut junk = agent.seal(&heartbeat(3)).unwrap();
    junk[0] ^= 0xff;
    assert_eq!(reason_of(open_one(&mut coordinator, &junk)), "bad_magic");
    assert_eq!(
        coordinator.state(),
        SessionState::Failed(RejectReason::BadMagic)
    );
    let later = agent.seal(&heartbeat(4)).unwrap();
    let error = open_one(&mut coordinator, &later).unwrap_err();
    assert_eq!(
        error,
        WireError::AlreadyFailed {
            earlier: RejectReason::BadMagic
        }
    );
}

#[test]
fn frame_of_exactly_the_minimum_size_with_garbage_tag_is_a_bad_tag() {
    let (_, mut coordinator, frame) = frame_for_coordinator();
    let mut short = frame[..HEADER_LEN].to_vec();
    short[LENGTH_AT..HEADER_LEN].copy_from_slice(&0u32.to_be_bytes());
    short.extend_from_slice(&[0u8; TAG_LEN]);
    assert_eq!(reason_of(open_one(&mut coordinator, &short)), "bad_tag");
}

#[test]
fn malformed_own_identity_is_refused() {
    let config = SessionConfig::new(cosched_proto::wire::Role::Agent, "", support::secret());
    assert_eq!(Session::initiate(config).unwrap_err().reason(), "handshake");
}

#[test]
fn every_reason_has_a_distinct_label() {
    let labels: std::collections::HashSet<_> = RejectReason::ALL
        .iter()
        .map(|reason| reason.as_str())
        .collect();
    assert_eq!(labels.len(), RejectReason::ALL.len());
}
