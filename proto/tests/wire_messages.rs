//! Every message survives sealing and opening, and each message's own rules
//! are enforced on both sides.

#[path = "wire_support.rs"]
mod support;

use std::collections::HashSet;

use cosched_proto::wire::{
    ClassSettings, ClockSample, DivisionClass, EXPECT_OWNER_SINCE_MINOR, ExpectJob,
    FIRST_FRAME_SINCE_MINOR, FrameReport, Heartbeat, HeartbeatReply, JobFrames, JobUtilisation,
    MOMENTS_SINCE_MINOR, Message, MessageKind, ProtocolVersion, READY_SINCE_MINOR, SwitchDivision,
    UtilReport,
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

#[test]
fn a_division_that_does_not_end_after_it_starts_is_refused_both_ways() {
    let empty = Message::SwitchDivision(SwitchDivision {
        epoch: 1,
        division: 2,
        class: DivisionClass::RealTime,
        apply_at_ns: 500,
        ends_at_ns: 500,
    });
    let (_, mut coordinator) = establish();
    let error = coordinator.seal(&empty).unwrap_err();
    assert_eq!(error.reason(), "payload_encode");
    assert!(error.to_string().contains("division 2"), "{error}");
    let error = Message::decode_payload(
        MessageKind::SwitchDivision,
        br#"{"epoch":1,"division":2,"class":"real-time","apply_at_ns":9,"ends_at_ns":3}"#,
    )
    .unwrap_err();
    assert_eq!(error.reason(), "payload_decode");
}

#[test]
fn division_classes_travel_as_kebab_case_names_and_others_are_refused() {
    let bytes = Message::SwitchDivision(SwitchDivision {
        epoch: 1,
        division: 0,
        class: DivisionClass::BestEffort,
        apply_at_ns: 1,
        ends_at_ns: 2,
    })
    .encode_payload()
    .unwrap();
    let json: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(json["class"], "best-effort");
    let error = Message::decode_payload(
        MessageKind::SwitchDivision,
        br#"{"epoch":1,"division":2,"class":"gold","apply_at_ns":1,"ends_at_ns":3}"#,
    )
    .unwrap_err();
    assert_eq!(error.reason(), "payload_decode");
}

#[test]
fn class_settings_with_a_zero_part_or_period_are_refused() {
    let (_, mut coordinator) = establish();
    for (ratio_rt, ratio_be, tdm_period_ns) in [(0, 1, 1), (2, 0, 1), (2, 1, 0)] {
        let settings = Message::ClassSettings(ClassSettings {
            ratio_rt,
            ratio_be,
            tdm_period_ns,
        });
        assert_eq!(
            coordinator.seal(&settings).unwrap_err().reason(),
            "payload_encode"
        );
    }
}

fn frames(job_id: u32, frames: u64, expected: u64, met: u64, missed: u64) -> JobFrames {
    JobFrames {
        job_id,
        frames,
        expected,
        met,
        missed,
        satisfied: false,
        work_p95_ns: None,
        work_mean_ns: None,
        work_sd_ns: None,
        ready: false,
    }
}

#[test]
fn frame_counts_that_do_not_add_up_or_repeat_a_job_are_refused() {
    let (mut agent, _) = establish();
    let cases = [
        (vec![frames(1, 10, 10, 9, 2)], "is not expected"),
        (vec![frames(1, 5, 10, 9, 1)], "exceeds the 5 frames"),
        (
            vec![frames(1, 10, 10, 9, 1), frames(1, 0, 0, 0, 0)],
            "twice",
        ),
    ];
    for (jobs, why) in cases {
        let error = agent
            .seal(&Message::FrameReport(FrameReport { jobs }))
            .unwrap_err();
        assert_eq!(error.reason(), "payload_encode");
        assert!(error.to_string().contains(why), "{error}");
    }
    let error = Message::decode_payload(
        MessageKind::FrameReport,
        br#"{"jobs":[{"job_id":1,"frames":1,"expected":4,"met":1,"missed":1,"satisfied":true}]}"#,
    )
    .unwrap_err();
    assert_eq!(error.reason(), "payload_decode");
}

#[test]
fn the_measured_work_of_a_frame_report_is_optional() {
    let message = Message::decode_payload(
        MessageKind::FrameReport,
        br#"{"jobs":[{"job_id":1,"frames":3,"expected":2,"met":2,"missed":0,"satisfied":true}]}"#,
    )
    .unwrap();
    let Message::FrameReport(report) = &message else {
        panic!("a frame report");
    };
    assert_eq!(report.jobs[0].work_p95_ns, None);
    let json = String::from_utf8(message.encode_payload().unwrap()).unwrap();
    assert!(!json.contains("work_p95_ns"), "{json}");
}

#[test]
fn the_best_effort_and_real_time_kinds_are_new_in_1_3() {
    let older = ProtocolVersion { major: 1, minor: 2 };
    for message in one_of_each_message() {
        let kind = message.kind();
        let newer = matches!(
            message,
            Message::ClassSettings(_)
                | Message::SwitchDivision(_)
                | Message::DivisionSwitched(_)
                | Message::FrameReport(_)
        );
        let newest = matches!(
            message,
            Message::SliceSchedule(_) | Message::FirstFrameAt(_)
        );
        assert_eq!(kind.since_minor() == 3, newer, "{kind}");
        assert_eq!(kind.known_to(older), !newer && !newest, "{kind}");
    }
}

#[test]
fn an_expected_jobs_owner_is_new_in_1_4_and_absent_when_unset() {
    assert_eq!(ProtocolVersion::CURRENT.minor, 8);
    assert_eq!(EXPECT_OWNER_SINCE_MINOR, 4);
    let mut expect = ExpectJob {
        job_id: 3,
        name: "slurm-5.0".into(),
        rank: 0,
        size: 2,
        owner: None,
    };
    // Unset: the payload a 1.2/1.3 agent accepts (it refuses unknown fields).
    let json =
        String::from_utf8(Message::ExpectJob(expect.clone()).encode_payload().unwrap()).unwrap();
    assert!(!json.contains("owner"), "{json}");
    expect.owner = Some(65534);
    let message = Message::ExpectJob(expect);
    let bytes = message.encode_payload().unwrap();
    assert!(String::from_utf8_lossy(&bytes).contains("\"owner\":65534"));
    assert_eq!(
        Message::decode_payload(message.kind(), &bytes).unwrap(),
        message
    );
}

#[test]
fn a_ranks_readiness_is_new_in_1_6_and_absent_when_false() {
    assert_eq!(READY_SINCE_MINOR, 6);
    let mut entry = frames(7, 0, 0, 0, 0);
    // False: the payload a 1.3-1.5 coordinator accepts (it refuses unknown
    // fields).
    let report = |entry| Message::FrameReport(FrameReport { jobs: vec![entry] });
    let json = String::from_utf8(report(entry).encode_payload().unwrap()).unwrap();
    assert!(!json.contains("ready"), "{json}");
    entry.ready = true;
    let message = report(entry);
    let bytes = message.encode_payload().unwrap();
    assert!(String::from_utf8_lossy(&bytes).contains("\"ready\":true"));
    assert_eq!(
        Message::decode_payload(message.kind(), &bytes).unwrap(),
        message
    );
}

#[test]
fn the_works_mean_and_deviation_are_new_in_1_8_and_absent_when_unmeasured() {
    assert_eq!(MOMENTS_SINCE_MINOR, 8);
    let mut entry = frames(7, 0, 0, 0, 0);
    // Unmeasured: the payload a 1.3-1.7 coordinator accepts.
    let report = |entry| Message::FrameReport(FrameReport { jobs: vec![entry] });
    let json = String::from_utf8(report(entry).encode_payload().unwrap()).unwrap();
    assert!(!json.contains("work_mean_ns"), "{json}");
    assert!(!json.contains("work_sd_ns"), "{json}");
    entry.work_mean_ns = Some(1_500_000);
    entry.work_sd_ns = Some(20_000);
    let message = report(entry);
    let bytes = message.encode_payload().unwrap();
    assert!(String::from_utf8_lossy(&bytes).contains("\"work_sd_ns\":20000"));
    assert_eq!(
        Message::decode_payload(message.kind(), &bytes).unwrap(),
        message
    );
}

#[test]
fn the_first_frame_gate_is_new_in_1_7_and_a_launch_without_one_is_what_older_agents_accept() {
    assert_eq!(FIRST_FRAME_SINCE_MINOR, 7);
    assert_eq!(MessageKind::FirstFrameAt.since_minor(), 7);
    assert!(!MessageKind::FirstFrameAt.known_to(ProtocolVersion { major: 1, minor: 6 }));
    let mut launch = match one_of_each_message()
        .into_iter()
        .find(|m| matches!(m, Message::LaunchJob(_)))
    {
        Some(Message::LaunchJob(launch)) => launch,
        _ => panic!("a launch"),
    };
    launch.first_frame_wait_ns = None;
    let json =
        String::from_utf8(Message::LaunchJob(launch.clone()).encode_payload().unwrap()).unwrap();
    assert!(!json.contains("first_frame"), "{json}");
    launch.first_frame_wait_ns = Some(5);
    let message = Message::LaunchJob(launch);
    let bytes = message.encode_payload().unwrap();
    assert!(String::from_utf8_lossy(&bytes).contains("\"first_frame_wait_ns\":5"));
    assert_eq!(
        Message::decode_payload(message.kind(), &bytes).unwrap(),
        message
    );
    // 0 is the gate file's "pending": never an instant on the wire.
    let zero = Message::decode_payload(MessageKind::FirstFrameAt, br#"{"job_id":1,"at_ns":0}"#);
    assert!(zero.is_err());
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
