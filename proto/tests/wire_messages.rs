//! Every message survives sealing and opening, and each message's own rules
//! are enforced on both sides.

#[path = "wire_support.rs"]
mod support;

use std::collections::HashSet;

use cosched_proto::wire::{
    ClockSample, Heartbeat, HeartbeatReply, JobUtilisation, Message, MessageKind, UtilReport,
};
use proptest::prelude::*;
use support::{establish, one_of_each_message, open_one, strategies};

#[test]
fn one_of_each_covers_every_application_kind() {
    let kinds: HashSet<MessageKind> = one_of_each_message().iter().map(Message::kind).collect();
    let expected: HashSet<MessageKind> = MessageKind::ALL
        .into_iter()
        .filter(|kind| !kind.is_handshake())
        .collect();
    assert_eq!(kinds, expected);
}

#[test]
fn every_message_round_trips_agent_to_coordinator() {
    let (mut agent, mut coordinator) = establish();
    for message in one_of_each_message() {
        let frame = agent.seal(&message).unwrap();
        assert_eq!(open_one(&mut coordinator, &frame), Ok(message));
    }
}

#[test]
fn every_message_round_trips_coordinator_to_agent() {
    let (mut agent, mut coordinator) = establish();
    for message in one_of_each_message() {
        let frame = coordinator.seal(&message).unwrap();
        assert_eq!(open_one(&mut agent, &frame), Ok(message));
    }
}

#[test]
fn payloads_are_readable_json() {
    let message = &one_of_each_message()[1];
    let json: serde_json::Value =
        serde_json::from_slice(&message.encode_payload().unwrap()).unwrap();
    assert_eq!(json["seq"], 7);
}

#[test]
fn unknown_payload_field_is_a_decode_error() {
    let error =
        Message::decode_payload(MessageKind::Heartbeat, br#"{"seq":1,"t1_ns":2,"extra":3}"#)
            .unwrap_err();
    assert_eq!(error.reason(), "payload_decode");
    assert!(error.to_string().contains("extra"), "{error}");
}

/// Adds `extra` to every object in `value` but free-form maps (`env`), one
/// object at a time: each variant must be refused.
fn with_one_extra_key(value: &serde_json::Value) -> Vec<serde_json::Value> {
    fn objects(value: &serde_json::Value, path: Vec<String>, out: &mut Vec<Vec<String>>) {
        match value {
            serde_json::Value::Object(map) => {
                if path.last().is_none_or(|key| key != "env") {
                    out.push(path.clone());
                }
                for (key, inner) in map {
                    let mut deeper = path.clone();
                    deeper.push(key.clone());
                    objects(inner, deeper, out);
                }
            }
            serde_json::Value::Array(items) => {
                for (index, inner) in items.iter().enumerate() {
                    let mut deeper = path.clone();
                    deeper.push(index.to_string());
                    objects(inner, deeper, out);
                }
            }
            _ => {}
        }
    }
    let mut paths = Vec::new();
    objects(value, Vec::new(), &mut paths);
    paths
        .into_iter()
        .map(|path| {
            let mut changed = value.clone();
            let pointer = path.iter().map(|key| format!("/{key}")).collect::<String>();
            changed.pointer_mut(&pointer).unwrap()["extra"] = 1.into();
            changed
        })
        .collect()
}

#[test]
fn every_message_refuses_an_unknown_field_at_any_depth() {
    for message in one_of_each_message() {
        let value: serde_json::Value =
            serde_json::from_slice(&message.encode_payload().unwrap()).unwrap();
        for changed in with_one_extra_key(&value) {
            let bytes = serde_json::to_vec(&changed).unwrap();
            let error = Message::decode_payload(message.kind(), &bytes).unwrap_err();
            assert_eq!(error.reason(), "payload_decode", "{changed}");
            assert!(error.to_string().contains("extra"), "{changed}: {error}");
        }
    }
}

#[test]
fn missing_payload_field_is_a_decode_error() {
    let error = Message::decode_payload(MessageKind::Heartbeat, br#"{"seq":1}"#).unwrap_err();
    assert_eq!(error.reason(), "payload_decode");
}

#[test]
fn handshake_kinds_are_not_application_messages() {
    let error = Message::decode_payload(MessageKind::Hello, b"{}").unwrap_err();
    assert_eq!(error.reason(), "unexpected_message");
}

#[test]
fn utilisation_outside_unit_range_is_refused_both_ways() {
    let report = Message::UtilReport(UtilReport {
        jobs: vec![JobUtilisation {
            job_id: 1,
            quantum: 0,
            cpu_utilisation: 1.5,
        }],
    });
    let (mut agent, _) = establish();
    assert_eq!(agent.seal(&report).unwrap_err().reason(), "payload_encode");
    let error = Message::decode_payload(
        MessageKind::UtilReport,
        br#"{"jobs":[{"job_id":1,"quantum":0,"cpu_utilisation":-0.1}]}"#,
    )
    .unwrap_err();
    assert_eq!(error.reason(), "payload_decode");
}

#[test]
fn launch_with_rank_outside_size_is_refused() {
    let Message::LaunchJob(mut launch) = one_of_each_message().swap_remove(5) else {
        panic!("sample 5 is LaunchJob");
    };
    launch.rank = launch.size;
    let (mut agent, _) = establish();
    let error = agent.seal(&Message::LaunchJob(launch)).unwrap_err();
    assert_eq!(error.reason(), "payload_encode");
    assert!(!error.is_fatal());
}

#[test]
fn a_refused_send_does_not_use_up_a_sequence_number() {
    let (mut agent, mut coordinator) = establish();
    let bad = Message::UtilReport(UtilReport {
        jobs: vec![JobUtilisation {
            job_id: 1,
            quantum: 0,
            cpu_utilisation: f64::NAN,
        }],
    });
    assert!(agent.seal(&bad).is_err());
    let good = Message::Heartbeat(Heartbeat { seq: 1, t1_ns: 5 });
    assert_eq!(
        open_one(&mut coordinator, &agent.seal(&good).unwrap()),
        Ok(good)
    );
}

#[test]
fn heartbeat_exchange_estimates_offset() {
    let heartbeat = Heartbeat {
        seq: 9,
        t1_ns: 1_000,
    };
    // Replier's clock is 500 ns behind; 20 ns each way; 5 ns to answer.
    let reply = HeartbeatReply::answering(&heartbeat, 520, 525);
    assert_eq!((reply.seq, reply.t1_ns), (9, 1_000));
    let sample = ClockSample::from_reply(&reply, 1_045);
    assert_eq!(sample.offset_ns, -500);
    assert_eq!(sample.round_trip_ns, 40);
}

proptest! {
    #[test]
    fn arbitrary_messages_round_trip_through_payloads(message in strategies::message()) {
        let bytes = message.encode_payload().unwrap();
        prop_assert_eq!(Message::decode_payload(message.kind(), &bytes).unwrap(), message);
    }

    #[test]
    fn arbitrary_messages_round_trip_through_sessions(
        messages in proptest::collection::vec(strategies::message(), 1..8),
    ) {
        let (mut agent, mut coordinator) = establish();
        for message in messages {
            let frame = agent.seal(&message).unwrap();
            prop_assert_eq!(open_one(&mut coordinator, &frame).unwrap(), message.clone());
            let frame = coordinator.seal(&message).unwrap();
            prop_assert_eq!(open_one(&mut agent, &frame).unwrap(), message);
        }
    }
}
