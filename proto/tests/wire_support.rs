//! Shared helpers for the `wire_*` tests (included with `#[path]`; as a test
//! target of its own it has no tests).
#![allow(dead_code)]

use std::collections::BTreeMap;

use cosched_proto::wire::{
    CancelJob, CheckProgram, ClassSettings, DivisionClass, DivisionSwitched, ErrorReport,
    ExitStatus, ExpectJob, FrameReport, Heartbeat, HeartbeatReply, Inbound, JobClass, JobExited,
    JobFrames, JobUtilisation, LaunchJob, Message, ProgramCheck, ProgramChecked, RankRef,
    RanksReaped, ReapRanks, ReapedRank, Register, Role, Session, SessionConfig, SetPolicy,
    SharedSecret, SliceSwitched, SwitchDivision, SwitchSlice, UtilReport, WireError,
};

pub fn secret() -> SharedSecret {
    SharedSecret::parse("hex:000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f")
        .expect("valid test secret")
}

pub fn other_secret() -> SharedSecret {
    SharedSecret::parse("hex:ff0102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f")
        .expect("valid test secret")
}

pub fn agent_config() -> SessionConfig {
    let mut config = SessionConfig::new(Role::Agent, "node-a", secret());
    config.capabilities = vec!["ebpf".into(), "sched_deadline".into()];
    config
}

pub fn coordinator_config() -> SessionConfig {
    SessionConfig::new(Role::Coordinator, "coordinator", secret())
}

/// The bytes each side wrote during a handshake, for replay tests.
pub struct HandshakeRecord {
    pub hello: Vec<u8>,
    pub ack: Vec<u8>,
    pub confirm: Vec<u8>,
}

/// Runs a handshake: the agent initiates, the coordinator responds.
pub fn establish_recorded() -> (Session, Session, HandshakeRecord) {
    let (mut agent, hello) = Session::initiate(agent_config()).expect("initiate");
    let mut coordinator = Session::accept(coordinator_config()).expect("accept");
    let ack = match receive_one(&mut coordinator, &hello) {
        Ok(Inbound::Reply(bytes)) => bytes,
        other => panic!("expected HelloAck, got {other:?}"),
    };
    let confirm = match receive_one(&mut agent, &ack) {
        Ok(Inbound::Established {
            reply: Some(bytes), ..
        }) => bytes,
        other => panic!("expected Established with HelloConfirm, got {other:?}"),
    };
    match receive_one(&mut coordinator, &confirm) {
        Ok(Inbound::Established { reply: None, .. }) => {}
        other => panic!("expected Established, got {other:?}"),
    }
    (
        agent,
        coordinator,
        HandshakeRecord {
            hello,
            ack,
            confirm,
        },
    )
}

/// An established (agent, coordinator) pair.
pub fn establish() -> (Session, Session) {
    let (agent, coordinator, _) = establish_recorded();
    (agent, coordinator)
}

/// Feeds exactly one frame's bytes and returns what it produced.
pub fn receive_one(session: &mut Session, bytes: &[u8]) -> Result<Inbound, WireError> {
    let mut input = bytes;
    match session.receive(&mut input) {
        Ok(Some(inbound)) => {
            assert!(input.is_empty(), "one frame's bytes are consumed whole");
            Ok(inbound)
        }
        Ok(None) => session.finish().map(|()| panic!("frame produced nothing")),
        Err(error) => Err(error),
    }
}

/// Feeds one frame and expects a message out.
pub fn open_one(session: &mut Session, bytes: &[u8]) -> Result<Message, WireError> {
    receive_one(session, bytes).map(|inbound| match inbound {
        Inbound::Message(message) => message,
        other => panic!("expected a message, got {other:?}"),
    })
}

/// One message of every kind.
pub fn one_of_each_message() -> Vec<Message> {
    vec![
        Message::Register(Register {
            node_name: "node-a".into(),
            cpus: vec![0, 1],
            agent_addr: "10.0.0.2:7100".parse().unwrap(),
            metrics_addr: Some("10.0.0.2:9100".parse().unwrap()),
        }),
        Message::Heartbeat(Heartbeat {
            seq: 7,
            t1_ns: 1_700_000_000_123_456_789,
        }),
        Message::HeartbeatReply(HeartbeatReply {
            seq: 7,
            t1_ns: 1,
            t2_ns: 2,
            t3_ns: 3,
        }),
        Message::SetPolicy(SetPolicy {
            policy: "pb-sb".into(),
        }),
        Message::Error(ErrorReport {
            reason: "unknown job 9".into(),
        }),
        Message::LaunchJob(LaunchJob {
            job_id: 3,
            name: "ring".into(),
            rank: 1,
            size: 2,
            peers: vec!["10.0.0.1:7000".into(), "10.0.0.2:7000".into()],
            command: "/usr/bin/cosched-synth".into(),
            args: vec!["--pattern".into(), "ring".into()],
            env: BTreeMap::from([("RUST_LOG".to_string(), "info".to_string())]),
            cpus: vec![1],
            class: JobClass::RealTime {
                period_ns: 10_000_000,
                frames: 2,
                work_ns: 3_000_000,
            },
            exclusive: true,
            first_frame_wait_ns: Some(720_000_000),
        }),
        Message::CancelJob(CancelJob { job_id: 3 }),
        Message::JobExited(JobExited {
            job_id: 3,
            rank: 1,
            status: ExitStatus::Signalled { signal: 9 },
        }),
        Message::ReapRanks(ReapRanks {
            ranks: vec![RankRef { job_id: 3, rank: 1 }],
        }),
        Message::RanksReaped(RanksReaped {
            ranks: vec![ReapedRank {
                job_id: 3,
                rank: 1,
                processes: 2,
            }],
        }),
        Message::CheckProgram(CheckProgram {
            check_id: 11,
            command: "cosched-synth".into(),
            search_path: Some("/usr/local/bin:/usr/bin".into()),
        }),
        Message::ProgramChecked(ProgramChecked {
            check_id: 11,
            outcome: ProgramCheck::NotRunnable {
                reason: "not found in PATH /usr/local/bin:/usr/bin".into(),
            },
        }),
        Message::ExpectJob(ExpectJob {
            job_id: 6,
            name: "mpirun ring".into(),
            rank: 1,
            size: 2,
            owner: Some(1000),
        }),
        Message::SwitchSlice(SwitchSlice {
            epoch: 2,
            slice: 40,
            rows: vec![0, 3],
            active_jobs: vec![3, 5],
            apply_at_ns: 1_700_000_000_500_000_000,
            strict: true,
        }),
        Message::SliceSwitched(SliceSwitched {
            epoch: 2,
            slice: 40,
            switched_at_ns: 1_700_000_000_500_000_100,
        }),
        Message::UtilReport(UtilReport {
            jobs: vec![
                JobUtilisation {
                    job_id: 3,
                    quantum: 40,
                    cpu_utilisation: 0.625,
                },
                JobUtilisation {
                    job_id: 5,
                    quantum: 40,
                    cpu_utilisation: 1.0,
                },
            ],
        }),
        Message::ClassSettings(ClassSettings {
            ratio_rt: 2,
            ratio_be: 1,
            tdm_period_ns: 150_000_000,
        }),
        Message::SwitchDivision(SwitchDivision {
            epoch: 3,
            division: 8,
            class: DivisionClass::BestEffort,
            apply_at_ns: 1_700_000_000_100_000_000,
            ends_at_ns: 1_700_000_000_150_000_000,
        }),
        Message::DivisionSwitched(DivisionSwitched {
            epoch: 3,
            division: 8,
            switched_at_ns: 1_700_000_000_100_000_040,
        }),
        Message::FrameReport(FrameReport {
            jobs: vec![
                JobFrames {
                    job_id: 4,
                    frames: 1_205,
                    expected: 1_200,
                    met: 1_197,
                    missed: 3,
                    satisfied: true,
                    work_p95_ns: Some(2_400_000),
                    work_mean_ns: None,
                    work_sd_ns: None,
                    ready: false,
                },
                JobFrames {
                    job_id: 6,
                    frames: 0,
                    expected: 0,
                    met: 0,
                    missed: 0,
                    satisfied: false,
                    work_p95_ns: None,
                    work_mean_ns: None,
                    work_sd_ns: None,
                    ready: false,
                },
            ],
        }),
        Message::SliceSchedule(cosched_proto::wire::SliceSchedule {
            epoch: 3,
            first_slice: 40,
            first_apply_at_ns: 1_700_000_000_200_000_000,
            slice_ns: 10_000_000,
            slices: vec![
                cosched_proto::wire::ScheduledSlice {
                    rows: vec![0],
                    active_jobs: vec![1, 2],
                },
                cosched_proto::wire::ScheduledSlice {
                    rows: vec![1],
                    active_jobs: vec![],
                },
            ],
            repeat_from: 0,
            report_every: 10,
            strict: true,
        }),
        Message::FirstFrameAt(cosched_proto::wire::FirstFrameAt {
            job_id: 3,
            at_ns: 1_700_000_000_204_000_000,
        }),
    ]
}

pub mod strategies {
    //! Proptest strategies for arbitrary valid messages.

    use std::collections::BTreeMap;
    use std::net::SocketAddr;

    use cosched_proto::wire::{
        CancelJob, CheckProgram, ClassSettings, DivisionClass, DivisionSwitched, ErrorReport,
        ExitStatus, ExpectJob, FrameReport, Heartbeat, HeartbeatReply, JobClass, JobExited,
        JobFrames, JobUtilisation, LaunchJob, Message, ProgramCheck, ProgramChecked, RankRef,
        RanksReaped, ReapRanks, ReapedRank, Register, SetPolicy, SliceSwitched, SwitchDivision,
        SwitchSlice, UtilReport,
    };
    use proptest::collection::{btree_map, vec};
    use proptest::prelude::*;

    fn text() -> impl Strategy<Value = String> {
        // Any Unicode, including quotes, escapes and control characters.
        any::<String>().prop_map(|s| s.chars().take(24).collect())
    }

    /// Addresses serde can carry as text (no IPv6 flow info or scope id).
    fn addr() -> impl Strategy<Value = SocketAddr> {
        (any::<std::net::IpAddr>(), any::<u16>()).prop_map(|(ip, port)| SocketAddr::new(ip, port))
    }

    fn launch() -> impl Strategy<Value = LaunchJob> {
        (1u32..64)
            .prop_flat_map(|size| {
                (
                    Just(size),
                    0..size,
                    prop_oneof![Just(0usize), Just(size as usize)],
                )
            })
            .prop_flat_map(|(size, rank, peer_count)| {
                (
                    (any::<u32>(), text(), Just(rank), Just(size)),
                    vec(text(), peer_count..=peer_count),
                    text().prop_filter("non-empty command", |c| !c.is_empty()),
                    vec(text(), 0..4),
                    btree_map(text(), text(), 0..4),
                    vec(any::<u32>(), 0..4),
                    prop_oneof![
                        Just(JobClass::BestEffort),
                        (1u64.., any::<u32>(), any::<u64>()).prop_map(
                            |(period_ns, frames, work_ns)| JobClass::RealTime {
                                period_ns,
                                frames,
                                work_ns
                            }
                        ),
                    ],
                    (any::<bool>(), proptest::option::of(any::<u64>())),
                )
            })
            .prop_map(
                |(
                    (job_id, name, rank, size),
                    peers,
                    command,
                    args,
                    env,
                    cpus,
                    class,
                    (exclusive, first_frame_wait_ns),
                )| {
                    LaunchJob {
                        job_id,
                        name,
                        rank,
                        size,
                        peers,
                        command,
                        args,
                        env: env.into_iter().collect::<BTreeMap<_, _>>(),
                        cpus,
                        class,
                        exclusive,
                        first_frame_wait_ns,
                    }
                },
            )
    }

    fn exit_status() -> impl Strategy<Value = ExitStatus> {
        prop_oneof![
            any::<i32>().prop_map(|code| ExitStatus::Exited { code }),
            any::<i32>().prop_map(|signal| ExitStatus::Signalled { signal }),
            text().prop_map(|reason| ExitStatus::LaunchFailed { reason }),
        ]
    }

    /// Utilisation as k/1000: exactly representable through JSON text.
    fn utilisation() -> impl Strategy<Value = f64> {
        (0u32..=1000).prop_map(|k| f64::from(k) / 1000.0)
    }

    /// Consistent counts: `met + missed == expected`, `met <= frames`.
    fn job_frames() -> impl Strategy<Value = JobFrames> {
        (
            any::<u32>(),
            0u64..1 << 40,
            0u64..1 << 40,
            0u64..1 << 20,
            any::<bool>(),
            proptest::option::of(any::<u64>()),
        )
            .prop_map(
                |(job_id, met, extra_frames, missed, satisfied, work_p95_ns)| JobFrames {
                    job_id,
                    frames: met + extra_frames,
                    expected: met + missed,
                    met,
                    missed,
                    satisfied,
                    work_p95_ns,
                    work_mean_ns: None,
                    work_sd_ns: None,
                    ready: false,
                },
            )
    }

    /// The messages of protocol 1.3.
    pub fn classes_message() -> impl Strategy<Value = Message> {
        prop_oneof![
            (1u32.., 1u32.., 1u64..).prop_map(|(ratio_rt, ratio_be, tdm_period_ns)| {
                Message::ClassSettings(ClassSettings {
                    ratio_rt,
                    ratio_be,
                    tdm_period_ns,
                })
            }),
            (
                any::<[u64; 2]>(),
                any::<bool>(),
                0u64..u64::MAX - 1,
                1u64..1 << 40
            )
                .prop_map(|([epoch, division], rt, apply_at_ns, length)| {
                    Message::SwitchDivision(SwitchDivision {
                        epoch,
                        division,
                        class: if rt {
                            DivisionClass::RealTime
                        } else {
                            DivisionClass::BestEffort
                        },
                        apply_at_ns,
                        ends_at_ns: apply_at_ns.saturating_add(length),
                    })
                }),
            any::<[u64; 3]>().prop_map(|[epoch, division, switched_at_ns]| {
                Message::DivisionSwitched(DivisionSwitched {
                    epoch,
                    division,
                    switched_at_ns,
                })
            }),
            vec(job_frames(), 0..6).prop_map(|mut jobs| {
                let mut seen = std::collections::BTreeSet::new();
                jobs.retain(|job| seen.insert(job.job_id));
                Message::FrameReport(FrameReport { jobs })
            }),
            (any::<u32>(), 1u64..).prop_map(|(job_id, at_ns)| {
                Message::FirstFrameAt(cosched_proto::wire::FirstFrameAt { job_id, at_ns })
            }),
        ]
    }

    pub fn message() -> impl Strategy<Value = Message> {
        prop_oneof![
            classes_message(),
            (
                text().prop_filter("non-empty", |n| !n.is_empty()),
                vec(any::<u32>(), 0..8),
                addr(),
                proptest::option::of(addr())
            )
                .prop_map(|(node_name, cpus, agent_addr, metrics_addr)| {
                    Message::Register(Register {
                        node_name,
                        cpus,
                        agent_addr,
                        metrics_addr,
                    })
                }),
            (any::<u64>(), any::<u64>())
                .prop_map(|(seq, t1_ns)| Message::Heartbeat(Heartbeat { seq, t1_ns })),
            any::<[u64; 4]>().prop_map(|[seq, t1_ns, t2_ns, t3_ns]| {
                Message::HeartbeatReply(HeartbeatReply {
                    seq,
                    t1_ns,
                    t2_ns,
                    t3_ns,
                })
            }),
            text()
                .prop_filter("non-empty", |p| !p.is_empty())
                .prop_map(|policy| Message::SetPolicy(SetPolicy { policy })),
            text().prop_map(|reason| Message::Error(ErrorReport { reason })),
            launch().prop_map(Message::LaunchJob),
            any::<u32>().prop_map(|job_id| Message::CancelJob(CancelJob { job_id })),
            (any::<u32>(), any::<u32>(), exit_status()).prop_map(|(job_id, rank, status)| {
                Message::JobExited(JobExited {
                    job_id,
                    rank,
                    status,
                })
            }),
            (
                any::<[u64; 3]>(),
                vec(any::<u32>(), 0..4),
                vec(any::<u32>(), 0..8),
                any::<bool>()
            )
                .prop_map(
                    |([epoch, slice, apply_at_ns], rows, active_jobs, strict)| {
                        Message::SwitchSlice(SwitchSlice {
                            epoch,
                            slice,
                            rows,
                            active_jobs,
                            apply_at_ns,
                            strict,
                        })
                    }
                ),
            any::<[u64; 3]>().prop_map(|[epoch, slice, switched_at_ns]| {
                Message::SliceSwitched(SliceSwitched {
                    epoch,
                    slice,
                    switched_at_ns,
                })
            }),
            vec(
                (any::<u32>(), any::<u64>(), utilisation()).prop_map(
                    |(job_id, quantum, cpu_utilisation)| JobUtilisation {
                        job_id,
                        quantum,
                        cpu_utilisation,
                    }
                ),
                0..8
            )
            .prop_map(|jobs| Message::UtilReport(UtilReport { jobs })),
            vec(
                (any::<u32>(), any::<u32>()).prop_map(|(job_id, rank)| RankRef { job_id, rank }),
                1..8
            )
            .prop_map(|ranks| Message::ReapRanks(ReapRanks { ranks })),
            vec(
                any::<[u32; 3]>().prop_map(|[job_id, rank, processes]| ReapedRank {
                    job_id,
                    rank,
                    processes
                }),
                0..8
            )
            .prop_map(|ranks| Message::RanksReaped(RanksReaped { ranks })),
            (
                any::<u64>(),
                text().prop_filter("non-empty command", |c| !c.is_empty()),
                proptest::option::of(text())
            )
                .prop_map(|(check_id, command, search_path)| {
                    Message::CheckProgram(CheckProgram {
                        check_id,
                        command,
                        search_path,
                    })
                }),
            (
                any::<u64>(),
                prop_oneof![
                    text().prop_map(|path| ProgramCheck::Runnable { path }),
                    text().prop_map(|reason| ProgramCheck::NotRunnable { reason }),
                ]
            )
                .prop_map(|(check_id, outcome)| {
                    Message::ProgramChecked(ProgramChecked { check_id, outcome })
                }),
            (
                any::<u32>(),
                text().prop_filter("non-empty name", |n| !n.is_empty()),
                1u32..64
            )
                .prop_flat_map(|(job_id, name, size)| {
                    (
                        Just(job_id),
                        Just(name),
                        0..size,
                        Just(size),
                        proptest::option::of(any::<u32>()),
                    )
                })
                .prop_map(|(job_id, name, rank, size, owner)| {
                    Message::ExpectJob(ExpectJob {
                        job_id,
                        name,
                        rank,
                        size,
                        owner,
                    })
                }),
        ]
    }
}
