//! Scenario tests of the node side over the fake kernel: what reaches the
//! engine and what goes back to the coordinator.

use std::collections::HashSet;

use cosched_policy::classes::FairnessRatio;
use cosched_proto::wire::{
    CancelJob, ClassSettings, DivisionClass, ExitStatus, JobClass, JobExited, LaunchJob, Message,
    ProtocolVersion, SetPolicy, SwitchDivision, SwitchSlice,
};
use tokio::sync::mpsc::UnboundedReceiver;

use super::{
    Action, CoordNode, CoordinatorConfig,
    link::{LinkEvent, LinkHandle},
    metrics::CoordMetrics,
    node::INVENTORY_QUANTUM,
    timer::SwitchTimer,
};
use crate::{
    classes::ClassMode,
    config::Config,
    daemon::monotonic_ns,
    engine::Engine,
    kernel::{SchedAttr, fake::FakeKernel, fake_counters::record},
    restore::RestoreLedger,
};

struct Harness {
    engine: Engine<FakeKernel>,
    node: CoordNode,
    sent: UnboundedReceiver<Message>,
}

/// The link up with a coordinator of this build's protocol.
const UP: LinkEvent = LinkEvent::Up {
    protocol: ProtocolVersion::CURRENT,
};

fn harness() -> Harness {
    harness_with("")
}

/// A harness whose agent config has `extra` (e.g. a `[classes]` table).
fn harness_with(extra: &str) -> Harness {
    let config = Config::parse(
        &format!("node = \"n0\"\ncpus = [0]\nstate_dir = \"/st\"\n{extra}"),
        "test",
    )
    .unwrap();
    let engine = Engine::new(
        FakeKernel::default(),
        config,
        RestoreLedger::new(None),
        "test",
        2,
    );
    let coordinator: CoordinatorConfig = toml::from_str(
        "address = \"127.0.0.1:7400\"\nsecret = \"hex:000102030405060708090a0b0c0d0e0f\"",
    )
    .unwrap();
    let (link, sent) = LinkHandle::detached();
    let timer = SwitchTimer::new().unwrap();
    let metrics = CoordMetrics::register(&prometheus::Registry::new()).unwrap();
    Harness {
        engine,
        node: CoordNode::new(&coordinator, link, timer, metrics, 1),
        sent,
    }
}

impl Harness {
    fn event(&mut self, event: LinkEvent) -> Vec<Action> {
        let actions = self.node.on_link_event(&self.engine, event);
        super::apply_to_engine(&mut self.node, &mut self.engine, actions)
    }

    fn message(&mut self, message: impl Into<Message>) -> Vec<Action> {
        self.event(LinkEvent::Message(message.into()))
    }

    fn drain(&mut self) -> Vec<Message> {
        let mut messages = Vec::new();
        while let Ok(message) = self.sent.try_recv() {
            messages.push(message);
        }
        messages
    }

    /// A coordinator job whose rank runs as process `pid` here.
    fn running_job(&mut self, job: u32, pid: u32) {
        self.engine.kernel_mut().spawn(pid, SchedAttr::other(0));
        self.engine.reserve_job(job, "job", 0, None).unwrap();
        self.engine.manage_process(job, pid).unwrap();
        self.node.launched(job, 0, Ok(()));
    }

    /// A coordinator RT job (class `class`, its counter directory made as
    /// the daemon's launch makes it) whose rank runs as process `pid`.
    fn running_rt_job(&mut self, job: u32, pid: u32, class: &str) -> std::path::PathBuf {
        self.engine.kernel_mut().spawn(pid, SchedAttr::other(0));
        self.engine.reserve_job(job, "rt", 0, None).unwrap();
        let class = cosched_proto::class::parse_class(class).unwrap();
        let dir = self
            .engine
            .set_job_class(job, &class, true)
            .unwrap()
            .expect("a launched RT job has a counter directory");
        self.engine.manage_process(job, pid).unwrap();
        self.node.launched(job, 0, Ok(()));
        dir
    }

    /// Process `pid` of the RT job whose counters are in `dir` has called
    /// `cosched_rt_init()` (its counter, no frame yet), seen at the agent's
    /// next tick at 2 ms.
    fn counter_published(&mut self, dir: &std::path::Path, pid: u32) {
        self.engine.kernel_mut().counters.write(
            &dir.join(format!("{pid}.frames")),
            0,
            &record(pid, MS + 1, 0, 0),
        );
        self.engine.kernel_mut().now = 2 * MS;
        self.engine.policy_tick();
    }

    /// A global policy and, for the BE/RT ones, its class settings, as the
    /// coordinator sends them.
    fn policy(&mut self, name: &str, settings: Option<ClassSettings>) {
        self.message(SetPolicy {
            policy: name.into(),
        });
        if let Some(settings) = settings {
            self.message(settings);
        }
    }

    /// Waits for the switch timer, then applies what it fired.
    fn fire_timer(&mut self) -> Vec<Action> {
        assert!(self.node.armed_switches() > 0, "nothing armed would fire");
        self.node.wait_for_switch_timer();
        let actions = self.node.on_switch_timer();
        super::apply_to_engine(&mut self.node, &mut self.engine, actions)
    }

    /// The error reports sent since the last drain.
    fn errors(&mut self) -> Vec<String> {
        self.drain()
            .into_iter()
            .filter_map(|message| match message {
                Message::Error(report) => Some(report.reason),
                _ => None,
            })
            .collect()
    }

    /// A strict switch already due, so it is applied at once.
    fn switch_now(&mut self, slice: u64, active: &[u32]) {
        let switch = SwitchSlice {
            epoch: 1,
            slice,
            rows: vec![0],
            active_jobs: active.to_vec(),
            apply_at_ns: monotonic_ns().saturating_sub(1_000),
            strict: true,
        };
        self.message(switch);
    }
}

fn launch(job: u32) -> LaunchJob {
    LaunchJob {
        job_id: job,
        name: "ring".into(),
        rank: 0,
        size: 1,
        peers: vec![],
        command: "/bin/true".into(),
        args: vec![],
        env: Default::default(),
        cpus: vec![],
        class: JobClass::BestEffort,
        exclusive: false,
        first_frame_wait_ns: None,
    }
}

#[test]
fn joining_reports_the_running_coordinator_jobs_as_inventory() {
    let mut h = harness();
    h.running_job(7, 100);
    assert_eq!(h.event(UP), vec![Action::PolicyChanged]);
    let sent = h.drain();
    let Some(Message::UtilReport(inventory)) = sent.last() else {
        panic!("no inventory: {sent:?}");
    };
    assert_eq!(inventory.jobs.len(), 1);
    assert_eq!(inventory.jobs[0].job_id, 7);
    assert_eq!(inventory.jobs[0].quantum, INVENTORY_QUANTUM);
}

#[test]
fn a_due_switch_runs_only_the_slice_jobs_and_reports_the_instant() {
    let mut h = harness();
    h.running_job(7, 100);
    h.running_job(8, 200);
    h.event(UP);
    h.drain();
    h.switch_now(1, &[7]);
    let gang = h.engine.gang().expect("gang mode");
    assert_eq!(gang.active, HashSet::from([7]));
    assert!(!gang.strict);
    let sent = h.drain();
    assert!(
        sent.iter()
            .any(|message| matches!(message, Message::SliceSwitched(s) if s.slice == 1)),
        "{sent:?}"
    );
    // The next switch ends slice 1: job 7's utilisation is reported.
    h.switch_now(2, &[8]);
    let reported = h.drain().into_iter().any(|message| {
        matches!(message, Message::UtilReport(report)
            if report.jobs.iter().any(|job| job.job_id == 7 && job.quantum == 1))
    });
    assert!(reported);
    // A replayed older slice is not applied.
    h.switch_now(1, &[7]);
    assert_eq!(h.engine.gang().unwrap().active, HashSet::from([8]));
}

#[test]
fn losing_the_coordinator_leaves_gang_mode_and_its_policy() {
    let mut h = harness();
    h.event(UP);
    h.message(SetPolicy {
        policy: "fcs".into(),
    });
    assert_eq!(
        h.node.local_policy(),
        Some(cosched_policy::local::PolicyKind::Fcs)
    );
    assert!(h.node.gang_active());
    h.message(SetPolicy {
        policy: "gang".into(),
    });
    h.switch_now(1, &[]);
    assert!(h.engine.gang().is_some());
    let actions = h.event(LinkEvent::Down {
        reason: "heartbeat timeout".into(),
    });
    assert_eq!(actions, vec![Action::PolicyChanged]);
    assert!(h.engine.gang().is_none());
    assert_eq!(h.node.local_policy(), None);
    assert!(!h.node.gang_active());
}

#[test]
fn leaving_gang_for_fcs_or_fcfs_ends_the_overlay_at_once() {
    for next in ["fcs", "fcfs"] {
        let mut h = harness();
        h.running_job(7, 100);
        h.event(UP);
        h.message(SetPolicy {
            policy: "paired-gang".into(),
        });
        h.switch_now(1, &[7]);
        assert!(h.engine.gang().is_some());
        // No idle slice came before the switch: the overlay of slice 1
        // must not hold the jobs of the next policy out.
        h.message(SetPolicy {
            policy: next.into(),
        });
        assert!(h.engine.gang().is_none(), "{next}");
        assert_eq!(h.node.metrics.gang_mode.get(), 0, "{next}");
    }
    // Between gang and paired gang the overlay stays: the next slice
    // replaces it.
    let mut h = harness();
    h.running_job(7, 100);
    h.event(UP);
    h.switch_now(1, &[7]);
    h.message(SetPolicy {
        policy: "paired-gang".into(),
    });
    assert!(h.engine.gang().is_some());
}

#[test]
fn a_gated_launch_and_its_first_frame_instant_become_daemon_and_engine_actions() {
    let mut h = harness();
    h.event(UP);
    h.drain();
    let gated = LaunchJob {
        first_frame_wait_ns: Some(720_000_000),
        ..launch(9)
    };
    let actions = h.message(gated);
    assert!(matches!(
        &actions[..],
        [Action::Launch { spec, first_frame_wait_ns: Some(720_000_000) }] if spec.job_id == 9
    ));
    // The daemon launched it: an RT job with its counter directory and a
    // pending gate. The instant goes into the gate, nothing is left for
    // the daemon.
    h.engine
        .kernel_mut()
        .spawn(90, crate::kernel::SchedAttr::other(0));
    h.engine.reserve_job(9, "ring", 0, None).unwrap();
    let class = cosched_proto::class::parse_class("rt:10000000:2:2000000").unwrap();
    let dir = h.engine.set_job_class(9, &class, true).unwrap().unwrap();
    h.engine.gate_first_frame(9, 720_000_000).unwrap();
    let actions = h.message(cosched_proto::wire::FirstFrameAt {
        job_id: 9,
        at_ns: 5_000,
    });
    assert!(actions.is_empty());
    assert_eq!(
        h.engine.kernel().first_frame_gates[&dir],
        cosched_agent_common::first_frame::FirstFrameGate::at(5_000, 720_000_000)
    );
}

#[test]
fn launches_become_daemon_actions_and_failures_exits() {
    let mut h = harness();
    h.event(UP);
    h.drain();
    let actions = h.message(launch(9));
    assert!(matches!(&actions[..], [Action::Launch { spec, .. }] if spec.job_id == 9));
    h.node.launched(9, 0, Err("no such program".into()));
    let sent = h.drain();
    assert_eq!(
        sent,
        vec![Message::JobExited(JobExited {
            job_id: 9,
            rank: 0,
            status: ExitStatus::LaunchFailed {
                reason: "no such program".into()
            }
        })]
    );
    // A repeated launch of a rank that runs is not launched twice.
    h.running_job(10, 300);
    assert!(h.message(launch(10)).is_empty());
    // Cancels only concern jobs that run here.
    assert_eq!(
        h.message(CancelJob { job_id: 10 }),
        vec![Action::Cancel(10)]
    );
    assert!(h.message(CancelJob { job_id: 99 }).is_empty());
}

#[test]
fn exits_while_the_coordinator_is_away_are_reported_on_rejoin() {
    let mut h = harness();
    h.node.launched(11, 1, Err("gone".into()));
    assert!(h.drain().is_empty(), "nothing is sent while disconnected");
    h.event(UP);
    let sent = h.drain();
    assert!(matches!(&sent[0], Message::JobExited(exit) if exit.job_id == 11 && exit.rank == 1));
}

#[test]
fn unknown_policies_and_unexpected_messages_are_refused() {
    let mut h = harness();
    h.event(UP);
    h.drain();
    assert!(
        h.message(SetPolicy {
            policy: "lottery".into()
        })
        .is_empty()
    );
    assert!(
        matches!(&h.drain()[..], [Message::Error(report)] if report.reason.contains("lottery"))
    );
    h.message(JobExited {
        job_id: 1,
        rank: 0,
        status: ExitStatus::Exited { code: 0 },
    });
    assert_eq!(
        h.node
            .metrics
            .wire_rejected
            .with_label_values(&["unexpected_message"])
            .get(),
        1
    );
}

#[test]
fn program_checks_and_reap_orders_go_to_the_daemon_and_their_answers_back() {
    use cosched_proto::wire::{
        CheckProgram, ProgramCheck, ProgramChecked, RankRef, RanksReaped, ReapRanks, ReapedRank,
    };
    let mut h = harness();
    h.event(UP);
    h.drain();
    let check = CheckProgram {
        check_id: 4,
        command: "cosched-synth".into(),
        search_path: None,
    };
    assert_eq!(h.message(check.clone()), vec![Action::CheckProgram(check)]);
    h.node
        .program_checked(4, Err("cosched-synth: not found in PATH /bin".into()));
    assert_eq!(
        h.drain(),
        vec![Message::ProgramChecked(ProgramChecked {
            check_id: 4,
            outcome: ProgramCheck::NotRunnable {
                reason: "cosched-synth: not found in PATH /bin".into()
            }
        })]
    );
    let ranks = vec![RankRef { job_id: 9, rank: 1 }];
    assert_eq!(
        h.message(ReapRanks {
            ranks: ranks.clone()
        }),
        vec![Action::Reap(ranks)]
    );
    // A rank this agent runs is cancelled too (rank 0 of job 7 here).
    h.running_job(7, 100);
    let ranks = vec![
        RankRef { job_id: 7, rank: 0 },
        RankRef { job_id: 9, rank: 1 },
    ];
    assert_eq!(
        h.message(ReapRanks {
            ranks: ranks.clone()
        }),
        vec![Action::Cancel(7), Action::Reap(ranks)]
    );
    // Job 12 runs here, launched through the control socket: same id, not
    // the coordinator's. Nothing is killed for it; the order is answered.
    h.engine.kernel_mut().spawn(300, SchedAttr::other(0));
    h.engine.reserve_job(12, "local", 0, None).unwrap();
    h.engine.manage_process(12, 300).unwrap();
    h.drain();
    let ranks = vec![RankRef {
        job_id: 12,
        rank: 0,
    }];
    assert_eq!(h.message(ReapRanks { ranks }), Vec::new());
    assert_eq!(
        h.drain(),
        vec![Message::RanksReaped(RanksReaped {
            ranks: vec![ReapedRank {
                job_id: 12,
                rank: 0,
                processes: 0
            }]
        })]
    );
    let reaped = vec![ReapedRank {
        job_id: 9,
        rank: 1,
        processes: 2,
    }];
    h.node.ranks_reaped(reaped.clone());
    assert_eq!(
        h.drain(),
        vec![Message::RanksReaped(RanksReaped { ranks: reaped })]
    );
}

const MS: u64 = 1_000_000;

fn settings(rt: u32, be: u32) -> Option<ClassSettings> {
    Some(ClassSettings {
        ratio_rt: rt,
        ratio_be: be,
        tdm_period_ns: 150 * MS,
    })
}

fn division(number: u64, class: DivisionClass, apply_at_ns: u64) -> SwitchDivision {
    SwitchDivision {
        epoch: 4,
        division: number,
        class,
        apply_at_ns,
        ends_at_ns: apply_at_ns + 50 * MS,
    }
}

fn tdm_ratio(h: &Harness) -> Option<FairnessRatio> {
    match h.engine.class_mode() {
        Some(ClassMode::Tdm { ratio, .. }) => Some(ratio),
        _ => None,
    }
}

#[test]
fn the_2dcs_tdm_policy_starts_tdm_with_the_coordinators_ratio_and_leaving_it_ends_it() {
    let mut h = harness();
    h.event(UP);
    h.message(SetPolicy {
        policy: "2dcs-tdm".into(),
    });
    assert_eq!(h.engine.class_mode(), None, "waits for the ratio");
    assert!(h.node.gang_active(), "divisions are switched on time");
    h.message(settings(3, 1).unwrap());
    assert_eq!(tdm_ratio(&h), Some(FairnessRatio::new(3, 1).unwrap()));
    assert!(h.engine.status().classes.starts_with("tdm 3:1"));
    // New settings change the ratio and keep the mode.
    h.message(settings(1, 1).unwrap());
    assert_eq!(tdm_ratio(&h), Some(FairnessRatio::new(1, 1).unwrap()));
    h.policy("gang", None);
    assert_eq!(h.engine.class_mode(), None, "back to the config's: off");
    assert!(h.errors().is_empty());
}

#[test]
fn the_2dcs_ps_policy_shares_the_node_by_the_coordinators_ratio_with_the_configs_sleeper_credit() {
    let mut h = harness_with("[classes]\nps_sleeper_credit_us = 250");
    h.event(UP);
    h.policy("2dcs-ps", settings(2, 1));
    let Some(ClassMode::Ps { params, rt_band }) = h.engine.class_mode() else {
        panic!("{:?}", h.engine.class_mode());
    };
    assert_eq!(params.ratio, FairnessRatio::new(2, 1).unwrap());
    assert_eq!(params.sleeper_credit, 250_000);
    assert_eq!(rt_band, None, "the config's band");
    assert!(!h.node.gang_active(), "nothing is broadcast under 2DCS-PS");
}

#[test]
fn one_level_gang_runs_its_rows_as_gang_slices_and_holds_a_local_ps_mode_off() {
    let mut h = harness_with("[classes]\nmode = \"ps\"");
    assert!(matches!(h.engine.class_mode(), Some(ClassMode::Ps { .. })));
    h.running_job(7, 100);
    h.running_job(8, 200);
    h.event(UP);
    h.policy("one-level-gang", settings(2, 1));
    assert_eq!(
        h.engine.class_mode(),
        None,
        "1GS: rows, not a node's choice"
    );
    h.switch_now(1, &[7]);
    assert_eq!(h.engine.gang().unwrap().active, HashSet::from([7]));
    assert_eq!(h.node.metrics.gang_mode.get(), 1);
    // Losing the coordinator gives the config its mode back.
    h.event(LinkEvent::Down {
        reason: "gone".into(),
    });
    assert!(matches!(h.engine.class_mode(), Some(ClassMode::Ps { .. })));
    assert!(h.engine.gang().is_none());
}

#[test]
fn a_due_division_starts_in_the_engine_and_its_instant_is_reported() {
    let mut h = harness();
    h.running_rt_job(7, 100, "rt:10000000:2:1000000");
    h.event(UP);
    h.policy("2dcs-tdm", settings(2, 1));
    h.drain();
    let now = monotonic_ns();
    h.message(division(3, DivisionClass::BestEffort, now - MS));
    assert!(
        h.engine
            .status()
            .classes
            .starts_with("tdm 2:1 (be division)"),
        "{}",
        h.engine.status().classes
    );
    let sent = h.drain();
    let [Message::DivisionSwitched(switched)] = &sent[..] else {
        panic!("{sent:?}");
    };
    assert_eq!((switched.epoch, switched.division), (4, 3));
    assert!(switched.switched_at_ns >= now - MS);
    let outcome = |h: &Harness, label: &str| {
        h.node
            .metrics
            .division_switches
            .with_label_values(&[label])
            .get()
    };
    assert_eq!((outcome(&h, "late"), outcome(&h, "applied")), (1, 1));
    // A replayed division is stale: nothing changes, nothing is sent.
    h.message(division(2, DivisionClass::RealTime, now));
    assert!(h.engine.status().classes.contains("be division"));
    assert!(h.drain().is_empty());
    assert_eq!(outcome(&h, "stale"), 1);
    // The next one waits for its instant on the timer.
    h.message(division(
        4,
        DivisionClass::RealTime,
        monotonic_ns() + 2 * MS,
    ));
    assert!(h.engine.status().classes.contains("be division"), "not yet");
    h.fire_timer();
    assert!(h.engine.status().classes.contains("rt division"));
    assert!(matches!(
        &h.drain()[..],
        [Message::DivisionSwitched(s)] if s.division == 4
    ));
}

#[test]
fn divisions_outside_2dcs_tdm_and_unusable_settings_are_refused_and_change_nothing() {
    let mut h = harness();
    h.event(UP);
    h.policy("gang", None);
    h.drain();
    h.message(division(1, DivisionClass::BestEffort, monotonic_ns()));
    let errors = h.errors();
    assert!(
        matches!(&errors[..], [e] if e.contains("does not run 2dcs-tdm")),
        "{errors:?}"
    );
    assert_eq!(h.engine.class_mode(), None);
    // 2dcs-tdm without its settings yet: the mode has not started.
    h.policy("2dcs-tdm", None);
    h.message(division(1, DivisionClass::BestEffort, monotonic_ns()));
    let errors = h.errors();
    assert!(
        matches!(&errors[..], [e] if e.contains("no class settings")),
        "{errors:?}"
    );

    h.message(settings(2, 1).unwrap());
    h.drain();
    // Δ too short to give both divisions time: refused, the ratio stays.
    h.message(ClassSettings {
        ratio_rt: 5,
        ratio_be: 1,
        tdm_period_ns: 1,
    });
    let errors = h.errors();
    assert!(
        matches!(&errors[..], [e] if e.contains("class settings refused") && e.contains("TDM period 1 ns")),
        "{errors:?}"
    );
    assert_eq!(tdm_ratio(&h), Some(FairnessRatio::new(2, 1).unwrap()));
    // A division announced implausibly far ahead.
    let far = monotonic_ns() + super::switch::MAX_LEAD_NS + 1_000 * MS;
    h.message(division(1, DivisionClass::BestEffort, far));
    let errors = h.errors();
    assert!(
        matches!(&errors[..], [e] if e.contains("ahead; refused")),
        "{errors:?}"
    );
    assert!(h.engine.status().classes.contains("rt division"));
    assert_eq!(
        h.node
            .metrics
            .division_switches
            .with_label_values(&["refused"])
            .get(),
        3
    );
}

#[test]
fn a_division_pending_when_the_policy_leaves_2dcs_tdm_is_dropped() {
    let mut h = harness();
    h.event(UP);
    h.policy("2dcs-tdm", settings(2, 1));
    h.message(division(
        1,
        DivisionClass::BestEffort,
        monotonic_ns() + 2 * MS,
    ));
    h.policy("2dcs-ps", settings(2, 1));
    assert!(h.fire_timer().is_empty());
    assert!(matches!(h.engine.class_mode(), Some(ClassMode::Ps { .. })));
    assert!(
        !h.drain()
            .iter()
            .any(|m| matches!(m, Message::DivisionSwitched(_)))
    );
}

#[test]
fn frame_reports_carry_the_coordinators_rt_jobs_and_the_last_counts_come_before_the_exit() {
    let mut h = harness();
    let dir = h.running_rt_job(7, 100, "rt:10000000:2:1000000");
    h.running_job(8, 200); // best effort: no frames
    // Job 9: RT, but launched through the control socket.
    h.engine.kernel_mut().spawn(300, SchedAttr::other(0));
    h.engine.reserve_job(9, "local", 0, None).unwrap();
    let class = cosched_proto::class::parse_class("rt:10000000:1:1000000").unwrap();
    h.engine.set_job_class(9, &class, true).unwrap();
    h.engine.manage_process(9, 300).unwrap();
    h.event(UP);
    h.drain();
    // Process 100 produced its 2 frames of the window.
    let counter = record(100, MS + 1, 2, 2 * MS);
    h.engine
        .kernel_mut()
        .counters
        .write(&dir.join("100.frames"), 0, &counter);
    h.engine.kernel_mut().now = 5 * MS;
    h.engine.policy_tick();
    h.node.report_frames(&h.engine, 1_000 * MS);
    let sent = h.drain();
    let [Message::FrameReport(report)] = &sent[..] else {
        panic!("{sent:?}");
    };
    assert_eq!(report.jobs.len(), 1, "{report:?}");
    let job = report.jobs[0];
    assert_eq!((job.job_id, job.frames, job.satisfied), (7, 2, true));
    assert_eq!(job.met + job.missed, job.expected);
    // Not due again before the interval (500 ms by default).
    h.node.report_frames(&h.engine, 1_400 * MS);
    assert!(h.drain().is_empty());
    assert_eq!(h.node.metrics.frame_reports.get(), 1);
    // The job ends: its last counts, then its exit.
    h.node.jobs_finished(&h.engine, &[7, 8]);
    let sent = h.drain();
    assert!(
        matches!(&sent[..], [Message::FrameReport(r), Message::JobExited(a), Message::JobExited(b)]
            if r.jobs.len() == 1 && r.jobs[0].job_id == 7 && a.job_id == 7 && b.job_id == 8),
        "{sent:?}"
    );
}

#[test]
fn an_rt_job_whose_processes_publish_their_counters_is_reported_ready_at_once() {
    let mut h = harness();
    let dir = h.running_rt_job(7, 100, "rt:10000000:2:1000000");
    h.event(UP);
    h.drain();
    h.node.report_frames(&h.engine, 0);
    let sent = h.drain();
    let [Message::FrameReport(report)] = &sent[..] else {
        panic!("{sent:?}");
    };
    assert!(!report.jobs[0].ready, "still starting up: no counter yet");
    // Process 100 called cosched_rt_init(): its counter, no frame yet.
    h.counter_published(&dir, 100);
    // Long before the next periodic report.
    h.node.report_if_newly_ready(&h.engine, 10 * MS);
    let sent = h.drain();
    let [Message::FrameReport(report)] = &sent[..] else {
        panic!("{sent:?}");
    };
    assert_eq!((report.jobs[0].job_id, report.jobs[0].ready), (7, true));
    // Once only.
    h.node.report_if_newly_ready(&h.engine, 11 * MS);
    assert!(h.drain().is_empty());
}

#[test]
fn a_coordinator_older_than_1_6_is_not_told_readiness() {
    let mut h = harness();
    let dir = h.running_rt_job(7, 100, "rt:10000000:2:1000000");
    h.event(LinkEvent::Up {
        protocol: ProtocolVersion { major: 1, minor: 5 },
    });
    h.drain();
    h.counter_published(&dir, 100);
    h.node.report_if_newly_ready(&h.engine, 10 * MS);
    assert!(h.drain().is_empty(), "no early report");
    h.node.report_frames(&h.engine, 1_000 * MS);
    let sent = h.drain();
    let [Message::FrameReport(report)] = &sent[..] else {
        panic!("{sent:?}");
    };
    assert!(!report.jobs[0].ready, "a 1.5 coordinator refuses the field");
}

#[test]
fn a_coordinator_older_than_1_3_gets_no_frame_report() {
    let mut h = harness();
    h.running_rt_job(7, 100, "rt:10000000:2:1000000");
    h.event(LinkEvent::Up {
        protocol: ProtocolVersion { major: 1, minor: 2 },
    });
    h.drain();
    h.node.report_frames(&h.engine, 1_000 * MS);
    assert!(h.drain().is_empty());
    // Without a link nothing is sent either.
    h.event(LinkEvent::Down {
        reason: "gone".into(),
    });
    h.node.report_frames(&h.engine, 10_000 * MS);
    assert!(h.drain().is_empty());
}

/// A schedule of epoch 1 from slice `first` at `first_apply_at_ns`, slices
/// of `slice_ns`, cycling over `cycle` (each slice's active jobs).
fn schedule(
    first: u64,
    first_apply_at_ns: u64,
    slice_ns: u64,
    cycle: &[&[u32]],
    report_every: u64,
) -> cosched_proto::wire::SliceSchedule {
    cosched_proto::wire::SliceSchedule {
        epoch: 1,
        first_slice: first,
        first_apply_at_ns,
        slice_ns,
        slices: cycle
            .iter()
            .map(|jobs| cosched_proto::wire::ScheduledSlice {
                rows: vec![0],
                active_jobs: jobs.to_vec(),
            })
            .collect(),
        repeat_from: 0,
        report_every,
        strict: true,
    }
}

impl Harness {
    fn reported_slices(&mut self) -> Vec<u64> {
        self.drain()
            .into_iter()
            .filter_map(|message| match message {
                Message::SliceSwitched(switched) => Some(switched.slice),
                _ => None,
            })
            .collect()
    }

    fn active(&self) -> HashSet<u32> {
        self.engine.gang().expect("gang mode").active.clone()
    }
}

/// Jobs 7 and 8 running, a schedule from slice 10 in 2 ms alternating them
/// every 2 ms, reporting every second slice.
fn alternating_schedule_of_two_jobs() -> Harness {
    let mut h = harness();
    h.running_job(7, 100);
    h.running_job(8, 200);
    h.event(UP);
    h.drain();
    let start = monotonic_ns() + 2_000_000;
    h.message(schedule(10, start, 2_000_000, &[&[7], &[8]], 2));
    h
}

#[test]
fn a_schedule_switches_slice_after_slice_by_the_timer_and_reports_its_report_slices() {
    let mut h = alternating_schedule_of_two_jobs();
    let mut seen = Vec::new();
    let mut reported = Vec::new();
    for _ in 0..4 {
        h.fire_timer();
        seen.push(h.active());
        reported.extend(h.reported_slices());
    }
    let (seven, eight) = (HashSet::from([7]), HashSet::from([8]));
    assert_eq!(seen, [seven.clone(), eight.clone(), seven, eight]);
    assert_eq!(reported, [10, 12], "only slices that are multiples of 2");
}

/// Under a schedule the quanta's utilisation goes out with the switch
/// reports, not one message per slice.
#[test]
fn a_schedule_sends_the_quanta_utilisation_with_its_report_slices_only() {
    let mut h = alternating_schedule_of_two_jobs();
    let mut sent_per_switch = Vec::new();
    for _ in 0..4 {
        h.fire_timer();
        let quanta: Vec<Vec<u64>> = h
            .drain()
            .into_iter()
            .filter_map(|message| match message {
                Message::UtilReport(report) => {
                    Some(report.jobs.iter().map(|job| job.quantum).collect())
                }
                _ => None,
            })
            .collect();
        sent_per_switch.push(quanta);
    }
    // Slice 10 ends no quantum; 11 holds quantum 10; report slice 12 sends
    // quanta 10 and 11 in one message; 13 holds 12.
    let empty: Vec<Vec<u64>> = Vec::new();
    assert_eq!(
        sent_per_switch,
        [empty.clone(), empty.clone(), vec![vec![10, 11]], empty]
    );
}

#[test]
fn a_late_schedule_applies_its_first_slice_at_once_then_goes_on_from_the_next_due_one() {
    let mut h = harness();
    h.running_job(7, 100);
    h.running_job(8, 200);
    h.event(UP);
    h.drain();
    // Slice 0 started 3.5 slices ago: it is applied now, 1..=3 are over.
    let slice_ns = 20_000_000;
    let first = monotonic_ns() - 3 * slice_ns - slice_ns / 2;
    h.message(schedule(0, first, slice_ns, &[&[7], &[8]], 1));
    assert_eq!(h.active(), HashSet::from([7]));
    assert_eq!(h.reported_slices(), [0]);
    h.fire_timer();
    // Slice 4 (even: job 7's), not 1.
    assert_eq!(h.reported_slices(), [4]);
    assert_eq!(h.active(), HashSet::from([7]));
}

#[test]
fn a_switch_slice_replaces_the_schedule_and_its_armed_slice_is_dropped() {
    let mut h = harness();
    h.running_job(7, 100);
    h.running_job(8, 200);
    h.event(UP);
    h.drain();
    h.message(schedule(
        10,
        monotonic_ns() + 2_000_000,
        2_000_000,
        &[&[7]],
        1,
    ));
    assert_eq!(h.node.armed_switches(), 1);
    h.switch_now(10, &[8]);
    assert_eq!(h.active(), HashSet::from([8]));
    // The schedule's armed slice is cancelled: it never wakes the agent.
    assert_eq!(h.node.armed_switches(), 0);
    assert_eq!(h.active(), HashSet::from([8]));
    assert_eq!(h.reported_slices(), [10]);
}

#[test]
fn a_schedule_re_announced_from_a_slice_already_switched_goes_on_from_the_next() {
    let mut h = harness();
    h.running_job(7, 100);
    h.running_job(8, 200);
    h.event(UP);
    h.drain();
    let slice_ns = 2_000_000;
    let now = monotonic_ns();
    h.message(schedule(5, now - 1_000, slice_ns, &[&[7]], 1));
    assert_eq!(h.active(), HashSet::from([7]));
    // The coordinator's estimate of this clock moved: the same slices, now
    // half a slice later, and job 8 instead.
    h.message(schedule(5, now + slice_ns / 2, slice_ns, &[&[8]], 1));
    // The old schedule's armed slice 6 was cancelled: the next to fire
    // is the new schedule's slice 6.
    assert_eq!(h.node.armed_switches(), 1);
    h.fire_timer();
    assert_eq!(h.active(), HashSet::from([8]));
    assert_eq!(h.reported_slices(), [5, 6]);
}

#[test]
fn losing_the_coordinator_drops_the_schedule() {
    let mut h = harness();
    h.running_job(7, 100);
    h.event(UP);
    h.drain();
    h.message(schedule(
        1,
        monotonic_ns() + 2_000_000,
        2_000_000,
        &[&[7]],
        1,
    ));
    h.event(LinkEvent::Down {
        reason: "test".into(),
    });
    assert_eq!(h.node.armed_switches(), 0, "nothing left to fire");
    assert!(h.engine.gang().is_none());
}
