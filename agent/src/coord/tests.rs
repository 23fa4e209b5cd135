//! Scenario tests of the node side over the fake kernel: what reaches the
//! engine and what goes back to the coordinator.

use std::collections::HashSet;

use cosched_proto::wire::{
    CancelJob, ExitStatus, JobClass, JobExited, LaunchJob, Message, SetPolicy, SwitchSlice,
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
    config::Config,
    daemon::monotonic_ns,
    engine::Engine,
    kernel::{SchedAttr, fake::FakeKernel},
    restore::RestoreLedger,
};

struct Harness {
    engine: Engine<FakeKernel>,
    node: CoordNode,
    sent: UnboundedReceiver<Message>,
    _fired: UnboundedReceiver<u64>,
}

fn harness() -> Harness {
    let config = Config::parse("node = \"n0\"\ncpus = [0]", "test").unwrap();
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
    let (fired_tx, fired) = tokio::sync::mpsc::unbounded_channel();
    let timer = SwitchTimer::spawn(fired_tx, 0).unwrap();
    let metrics = CoordMetrics::register(&prometheus::Registry::new()).unwrap();
    Harness {
        engine,
        node: CoordNode::new(&coordinator, link, timer, metrics, 1),
        sent,
        _fired: fired,
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
    }
}

#[test]
fn joining_reports_the_running_coordinator_jobs_as_inventory() {
    let mut h = harness();
    h.running_job(7, 100);
    assert_eq!(h.event(LinkEvent::Up), vec![Action::PolicyChanged]);
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
    h.event(LinkEvent::Up);
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
    h.event(LinkEvent::Up);
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
        h.event(LinkEvent::Up);
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
    h.event(LinkEvent::Up);
    h.switch_now(1, &[7]);
    h.message(SetPolicy {
        policy: "paired-gang".into(),
    });
    assert!(h.engine.gang().is_some());
}

#[test]
fn launches_become_daemon_actions_and_failures_exits() {
    let mut h = harness();
    h.event(LinkEvent::Up);
    h.drain();
    let actions = h.message(launch(9));
    assert!(matches!(&actions[..], [Action::Launch(spec)] if spec.job_id == 9));
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
    h.event(LinkEvent::Up);
    let sent = h.drain();
    assert!(matches!(&sent[0], Message::JobExited(exit) if exit.job_id == 11 && exit.rank == 1));
}

#[test]
fn unknown_policies_and_unexpected_messages_are_refused() {
    let mut h = harness();
    h.event(LinkEvent::Up);
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
    h.event(LinkEvent::Up);
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
