//! Scenario tests of the core: what it decides and what it sends.

use std::collections::{BTreeMap, BTreeSet};

use cosched_proto::wire::{
    CancelJob, CheckProgram, ExitStatus, FrameReport, HeartbeatReply, JobClass, JobExited,
    JobFrames, JobUtilisation, LaunchJob, Message, ProgramCheck, ProgramChecked, ProtocolVersion,
    RankRef, ReapRanks, Register, SetPolicy, SliceSchedule, SliceSwitched, SwitchSlice, UtilReport,
};

use super::{Core, CoreConfig, Effect, INVENTORY_QUANTUM, Submitted, SwitchObservation};
use crate::{
    admin::protocol::{JobStateView, JobView, Submission},
    policy::GlobalPolicy,
};

/// The messages of one kind among `effects`, with the node each goes to.
macro_rules! sent_of {
    ($effects:expr, $variant:path) => {
        sent($effects)
            .into_iter()
            .filter_map(|(node, message)| match message {
                $variant(inner) => Some((node, inner)),
                _ => None,
            })
            .collect()
    };
}

mod attached;
mod checks;
mod classes;
mod leftovers;
mod one_gs;
mod one_gs_schedule;
mod paired_schedule;
mod schedule;

/// The coordinator's clock in these tests, ns; program checks time out
/// [`CHECK_TIMEOUT_NS`] after it.
const NOW_NS: u64 = 1_000_000_000;
const CHECK_TIMEOUT_NS: u64 = 3_000_000_000;

fn config(nodes: usize, policy: GlobalPolicy) -> CoreConfig {
    CoreConfig {
        nodes: (0..nodes).map(|node| format!("n{node}")).collect(),
        policy,
        max_rows: 2,
        allocation: Default::default(),
        queue: Default::default(),
        pairing: Default::default(),
        job_port_base: 20000,
        job_port_count: 100,
        finished_retention: 10,
        check_timeout_ns: CHECK_TIMEOUT_NS,
        slice_ns: SLICE_NS,
        classes: Default::default(),
        // The per-slice protocol; `schedule.rs` tests the schedules.
        schedule_ahead: false,
        paired_schedule_ahead: false,
        one_gs_schedule_ahead: false,
        schedule_clock: Default::default(),
    }
}

/// One slice (a 1GS slot) in these tests.
const SLICE_NS: u64 = 100_000_000;

fn register(core: &mut Core, node: usize, conn: u64) {
    register_speaking(core, node, conn, ProtocolVersion::CURRENT);
}

fn register_speaking(core: &mut Core, node: usize, conn: u64, protocol: ProtocolVersion) {
    let message = Register {
        node_name: format!("n{node}"),
        cpus: vec![node as u32],
        agent_addr: format!("10.0.0.{}:0", node + 10).parse().unwrap(),
        metrics_addr: None,
    };
    assert_eq!(
        core.register(&message, "127.0.0.1".parse().unwrap(), conn, protocol),
        Ok(node)
    );
}

/// The `CheckProgram` messages among the pending effects, taken out of them.
fn take_checks(core: &mut Core) -> Vec<(usize, CheckProgram)> {
    let mut checks = Vec::new();
    core.out.retain(|effect| match effect {
        Effect::Send {
            node,
            message: Message::CheckProgram(check),
        } => {
            checks.push((*node, check.clone()));
            false
        }
        _ => true,
    });
    checks
}

/// The answer to submission `check`, if it was decided (taken out of the
/// pending effects).
fn take_answer(core: &mut Core, check: u64) -> Option<Result<JobView, String>> {
    let position = core.out.iter().position(
        |effect| matches!(effect, Effect::Submitted { check: decided, .. } if *decided == check),
    )?;
    match core.out.remove(position) {
        Effect::Submitted { result, .. } => Some(result.map(|view| *view)),
        _ => unreachable!("matched above"),
    }
}

fn answer(core: &mut Core, node: usize, check: u64, outcome: ProgramCheck) {
    let answer = ProgramChecked {
        check_id: check,
        outcome,
    };
    core.program_checked(node, &answer, NOW_NS).unwrap();
}

fn runnable() -> ProgramCheck {
    ProgramCheck::Runnable {
        path: "/bin/synth".into(),
    }
}

/// Submits `job`, every asked agent finding the program; the job's view.
/// The check messages are taken out of the effects, the rest stays.
fn submit(core: &mut Core, job: Submission) -> JobView {
    match core.submit(job, 0, NOW_NS).expect("submission accepted") {
        Submitted::Job(view) => *view,
        Submitted::Checking(check) => {
            for (node, asked) in take_checks(core) {
                answer(core, node, asked.check_id, runnable());
            }
            take_answer(core, check)
                .expect("decided once every agent answered")
                .expect("admitted")
        }
    }
}

fn inventory(core: &mut Core, node: usize, jobs: &[u32]) {
    let report = UtilReport {
        jobs: jobs
            .iter()
            .map(|&job_id| JobUtilisation {
                job_id,
                quantum: INVENTORY_QUANTUM,
                cpu_utilisation: 0.0,
            })
            .collect(),
    };
    core.util_report(node, &report);
}

/// A core whose nodes all registered and reconciled (empty inventories).
fn cluster(nodes: usize, policy: GlobalPolicy) -> Core {
    cluster_of(config(nodes, policy))
}

fn cluster_of(config: CoreConfig) -> Core {
    let nodes = config.nodes.len();
    let mut core = Core::new(config).unwrap();
    for node in 0..nodes {
        register(&mut core, node, node as u64 + 1);
        inventory(&mut core, node, &[]);
    }
    core.take_effects();
    core
}

/// A core whose nodes all registered, reconciled and have clock estimates
/// certain enough for a schedule (what announcing slices ahead needs).
fn clocked_cluster_of(config: CoreConfig) -> Core {
    let nodes = config.nodes.len();
    let mut core = cluster_of(config);
    for node in 0..nodes {
        clock_in_step(&mut core, node);
    }
    core.take_effects();
    core
}

/// The slice schedules sent, by node.
fn schedules(effects: &[Effect]) -> Vec<(usize, SliceSchedule)> {
    sent_of!(effects, Message::SliceSchedule)
}

/// Plans slice `k` (starting at NOW + k slices).
fn plan(core: &mut Core, k: u64) -> Vec<Effect> {
    core.plan_slice(NOW_NS + k * SLICE_NS);
    core.take_effects()
}

fn job(name: &str, nodes: usize) -> Submission {
    Submission {
        name: name.into(),
        nodes,
        command: "/bin/synth".into(),
        args: vec!["--duration".into(), "1".into()],
        env: BTreeMap::new(),
        class: JobClass::BestEffort,
        exclusive: false,
    }
}

/// A frame report of `job` from a rank whose processes are ready for
/// their first frame (no frame yet).
fn ready(job: u32) -> FrameReport {
    FrameReport {
        jobs: vec![JobFrames {
            job_id: job,
            frames: 0,
            expected: 0,
            met: 0,
            missed: 0,
            satisfied: false,
            work_p95_ns: None,
            work_mean_ns: None,
            work_sd_ns: None,
            ready: true,
        }],
    }
}

fn sent(effects: &[Effect]) -> Vec<(usize, Message)> {
    effects
        .iter()
        .filter_map(|effect| match effect {
            Effect::Send { node, message } => Some((*node, message.clone())),
            Effect::Persist | Effect::Submitted { .. } | Effect::Observed(_) => None,
        })
        .collect()
}

/// One heartbeat exchange that shows `node`'s clock 1 ms ahead of the
/// coordinator's (20 µs each way, 5 µs in the agent).
fn clock_1ms_ahead(core: &mut Core, node: usize) -> cosched_policy::global::OffsetEstimate {
    let reply = HeartbeatReply {
        seq: 1,
        t1_ns: 10_000_000,
        t2_ns: 11_020_000,
        t3_ns: 11_025_000,
    };
    core.heartbeat_reply(node, &reply, 10_045_000).unwrap()
}

/// One quiet heartbeat exchange (20 µs each way) that shows `node`'s clock
/// equal to the coordinator's: an estimate certain enough for a schedule.
fn clock_in_step(core: &mut Core, node: usize) {
    let reply = HeartbeatReply {
        seq: 1,
        t1_ns: 10_000_000,
        t2_ns: 10_020_000,
        t3_ns: 10_025_000,
    };
    core.heartbeat_reply(node, &reply, 10_045_000).unwrap();
}

fn launches(effects: &[Effect]) -> Vec<(usize, LaunchJob)> {
    sent_of!(effects, Message::LaunchJob)
}

fn switches(effects: &[Effect]) -> Vec<(usize, SwitchSlice)> {
    sent_of!(effects, Message::SwitchSlice)
}

fn exit(core: &mut Core, node: usize, job: u32, rank: u32, code: i32) {
    core.job_exited(
        node,
        &JobExited {
            job_id: job,
            rank,
            status: ExitStatus::Exited { code },
        },
    )
    .unwrap();
}

#[test]
fn submitted_job_is_launched_on_its_nodes_with_peer_addresses() {
    let mut core = cluster(2, GlobalPolicy::Gang);
    let view = submit(&mut core, job("ring", 2));
    assert_eq!(view.state, JobStateView::Running);
    assert_eq!(view.row, Some(0));
    let effects = core.take_effects();
    assert!(effects.contains(&Effect::Persist));
    let launched = launches(&effects);
    assert_eq!(launched.len(), 2);
    let port = view.port.unwrap();
    for (node, launch) in launched {
        assert_eq!(launch.rank as usize, node);
        assert_eq!(launch.size, 2);
        assert_eq!(
            launch.peers,
            vec![format!("10.0.0.10:{port}"), format!("10.0.0.11:{port}")]
        );
        assert_eq!(launch.args, vec!["--duration", "1"]);
    }
}

#[test]
fn job_completes_when_every_rank_exited_cleanly() {
    let mut core = cluster(2, GlobalPolicy::Gang);
    let id = submit(&mut core, job("ring", 2)).id;
    exit(&mut core, 0, id, 0, 0);
    assert_eq!(core.job_view(id).unwrap().state, JobStateView::Running);
    exit(&mut core, 1, id, 1, 0);
    assert_eq!(core.job_view(id).unwrap().state, JobStateView::Completed);
    assert!(core.matrix().has_no_placed_jobs());
    assert!(core.jobs_view(false).is_empty());
    assert_eq!(core.jobs_view(true).len(), 1);
}

#[test]
fn failed_rank_cancels_the_rest_of_its_job() {
    let mut core = cluster(2, GlobalPolicy::Gang);
    let id = submit(&mut core, job("ring", 2)).id;
    core.take_effects();
    exit(&mut core, 0, id, 0, 3);
    let effects = core.take_effects();
    assert_eq!(
        sent(&effects),
        vec![(1, Message::CancelJob(CancelJob { job_id: id }))]
    );
    core.job_exited(
        1,
        &JobExited {
            job_id: id,
            rank: 1,
            status: ExitStatus::Signalled { signal: 9 },
        },
    )
    .unwrap();
    let view = core.job_view(id).unwrap();
    assert_eq!(view.state, JobStateView::Failed);
    assert!(view.reason.unwrap().contains("code 3"), "root cause kept");
}

#[test]
fn exit_reports_for_other_nodes_or_unknown_jobs_are_ignored() {
    let mut core = cluster(2, GlobalPolicy::Gang);
    let id = submit(&mut core, job("solo", 1)).id;
    let wrong_node = JobExited {
        job_id: id,
        rank: 0,
        status: ExitStatus::Exited { code: 0 },
    };
    assert!(core.job_exited(1, &wrong_node).is_err());
    assert!(
        core.job_exited(
            0,
            &JobExited {
                job_id: 99,
                ..wrong_node.clone()
            }
        )
        .is_err()
    );
    core.job_exited(0, &wrong_node).unwrap();
    assert!(core.job_exited(0, &wrong_node).is_err(), "duplicate exit");
}

#[test]
fn fcfs_queues_jobs_until_nodes_are_free() {
    let mut core = cluster(2, GlobalPolicy::Fcfs);
    let first = submit(&mut core, job("a", 2)).id;
    let second = submit(&mut core, job("b", 1));
    assert_eq!(second.state, JobStateView::Queued);
    assert_eq!(second.queue_position, Some(0));
    core.take_effects();
    exit(&mut core, 0, first, 0, 0);
    exit(&mut core, 1, first, 1, 0);
    assert_eq!(
        core.job_view(second.id).unwrap().state,
        JobStateView::Running
    );
    assert_eq!(launches(&core.take_effects()).len(), 1);
}

#[test]
fn gang_gives_each_row_its_own_slice_with_the_owner_on_each_node() {
    let mut core = cluster(2, GlobalPolicy::Gang);
    let a = submit(&mut core, job("a", 2)).id;
    let b = submit(&mut core, job("b", 2)).id;
    core.take_effects();
    let mut owners = Vec::new();
    for slice in 0..4u64 {
        core.plan_slice(1_000_000 * (slice + 1));
        let switched = switches(&core.take_effects());
        assert_eq!(switched.len(), 2);
        assert_eq!(switched[0].1.active_jobs, switched[1].1.active_jobs);
        assert!(
            switched
                .iter()
                .all(|(_, switch)| switch.strict && switch.slice == slice)
        );
        owners.push(switched[0].1.active_jobs.clone());
    }
    assert_eq!(owners, vec![vec![a], vec![b], vec![a], vec![b]]);
}

#[test]
fn switch_instants_are_converted_to_each_agents_clock() {
    let mut core = cluster(2, GlobalPolicy::Gang);
    submit(&mut core, job("a", 2));
    let estimate = clock_1ms_ahead(&mut core, 1);
    assert_eq!(estimate.offset_ns, 1_000_000);
    core.take_effects();
    core.plan_slice(50_000_000);
    let switched = switches(&core.take_effects());
    assert_eq!(switched[0].1.apply_at_ns, 50_000_000);
    assert_eq!(switched[1].1.apply_at_ns, 51_000_000);
    // Reports in the agents' clocks come back as coordinator instants.
    let report = |at| SliceSwitched {
        epoch: core.epoch(),
        slice: 0,
        switched_at_ns: at,
    };
    let (first, second) = (report(50_000_030), report(51_000_010));
    assert_eq!(core.slice_switched(0, &first).len(), 1);
    let observations = core.slice_switched(1, &second);
    assert_eq!(
        observations.last(),
        Some(&SwitchObservation::Skew {
            seconds: 20e-9,
            nodes: 2
        })
    );
}

#[test]
fn nothing_placed_sends_one_idle_switch_then_stays_quiet() {
    let mut core = cluster(2, GlobalPolicy::Gang);
    core.plan_slice(1_000);
    let idle = switches(&core.take_effects());
    assert_eq!(idle.len(), 2);
    assert!(idle.iter().all(|(_, switch)| switch.rows.is_empty()));
    core.plan_slice(2_000);
    assert!(switches(&core.take_effects()).is_empty());
}

#[test]
fn utilisation_reports_of_all_ranks_feed_the_predictor() {
    let mut core = cluster(2, GlobalPolicy::PairedGang);
    let id = submit(&mut core, job("a", 2)).id;
    assert_eq!(core.job_view(id).unwrap().predicted_percent, Some(100.0));
    for (node, utilisation) in [(0, 0.30), (1, 0.50)] {
        core.util_report(
            node,
            &UtilReport {
                jobs: vec![JobUtilisation {
                    job_id: id,
                    quantum: 0,
                    cpu_utilisation: utilisation,
                }],
            },
        );
    }
    let view = core.job_view(id).unwrap();
    assert!((view.cpu_percent.unwrap() - 40.0).abs() < 1e-9);
    assert!((view.predicted_percent.unwrap() - 40.0).abs() < 1e-9);
}

/// Scheduled agents send a quantum's utilisation with their next switch
/// report, up to `report_every` slices later: a quantum one node reported
/// at once still waits for the other's and is learned from both.
#[test]
fn a_quantum_reported_late_with_a_switch_report_is_learned_from_every_node() {
    let slice_ns = 10_000_000;
    let mut core = cluster_of(CoreConfig {
        slice_ns,
        ..config(2, GlobalPolicy::PairedGang)
    });
    let id = submit(&mut core, job("a", 2)).id;
    let report = |utilisation| UtilReport {
        jobs: vec![JobUtilisation {
            job_id: id,
            quantum: 0,
            cpu_utilisation: utilisation,
        }],
    };
    core.util_report(0, &report(0.30));
    let report_every = super::slicing::REPORT_PERIOD_NS / slice_ns;
    assert_eq!(report_every, 10);
    for slice in 0..report_every {
        core.plan_slice(1_000 + slice * slice_ns);
    }
    core.util_report(1, &report(0.50));
    let view = core.job_view(id).unwrap();
    assert!((view.cpu_percent.unwrap() - 40.0).abs() < 1e-9, "{view:?}");
}

#[test]
fn paired_gang_runs_two_light_rows_together() {
    let mut core = cluster(2, GlobalPolicy::PairedGang);
    let a = submit(&mut core, job("a", 2)).id;
    let b = submit(&mut core, job("b", 2)).id;
    for (id, utilisation) in [(a, 0.3), (b, 0.4)] {
        for node in 0..2 {
            core.util_report(
                node,
                &UtilReport {
                    jobs: vec![JobUtilisation {
                        job_id: id,
                        quantum: 0,
                        cpu_utilisation: utilisation,
                    }],
                },
            );
        }
    }
    core.take_effects();
    core.plan_slice(1_000);
    let switched = switches(&core.take_effects());
    assert_eq!(switched[0].1.rows.len(), 2, "{switched:?}");
    assert_eq!(
        switched[0]
            .1
            .active_jobs
            .iter()
            .copied()
            .collect::<BTreeSet<_>>(),
        BTreeSet::from([a, b])
    );
    assert!(
        core.job_view(a)
            .unwrap()
            .pair
            .unwrap()
            .contains("paired with")
    );
}

#[test]
fn cancelling_a_running_job_kills_its_ranks_and_frees_its_cells() {
    let mut core = cluster(2, GlobalPolicy::Fcfs);
    let a = submit(&mut core, job("a", 2)).id;
    let b = submit(&mut core, job("b", 2)).id;
    core.take_effects();
    let view = core.cancel(a).unwrap();
    assert_eq!(view.state, JobStateView::Cancelled);
    let effects = core.take_effects();
    let messages = sent(&effects);
    for node in 0..2 {
        let reap = ReapRanks {
            ranks: vec![RankRef {
                job_id: a,
                rank: node as u32,
            }],
        };
        assert!(
            messages.contains(&(node, Message::ReapRanks(reap))),
            "{messages:?}"
        );
    }
    assert_eq!(launches(&effects).len(), 2, "the queued job starts");
    assert_eq!(core.job_view(b).unwrap().state, JobStateView::Running);
    let error = core.cancel(a).unwrap_err();
    assert!(error.contains("already ended"), "{error}");
    assert_eq!(core.cancel(77).unwrap_err(), "unknown job 77");
}

#[test]
fn unknown_node_is_refused_with_the_known_names() {
    let mut core = Core::new(config(2, GlobalPolicy::Gang)).unwrap();
    let message = Register {
        node_name: "intruder".into(),
        cpus: vec![],
        agent_addr: "10.0.0.1:0".parse().unwrap(),
        metrics_addr: None,
    };
    let error = core
        .register(
            &message,
            "10.0.0.1".parse().unwrap(),
            1,
            ProtocolVersion::CURRENT,
        )
        .unwrap_err();
    assert!(error.contains("n0"), "{error}");
}

#[test]
fn registration_tells_the_agent_the_policy_and_launches_wait_for_its_inventory() {
    let mut core = Core::new(config(1, GlobalPolicy::Fcs)).unwrap();
    register(&mut core, 0, 1);
    let effects = core.take_effects();
    assert!(sent(&effects).contains(&(
        0,
        Message::SetPolicy(SetPolicy {
            policy: "fcs".into()
        })
    )));
    // Registered but not reconciled: the program is checked, the job
    // admitted, its launch waits for the inventory.
    submit(&mut core, job("a", 1));
    assert!(launches(&core.take_effects()).is_empty());
    inventory(&mut core, 0, &[]);
    assert_eq!(launches(&core.take_effects()).len(), 1);
}

#[test]
fn restart_keeps_confirmed_ranks_and_fails_jobs_whose_ranks_are_gone() {
    let mut core = cluster(2, GlobalPolicy::Gang);
    let kept = submit(&mut core, job("kept", 2)).id;
    let lost = submit(&mut core, job("lost", 2)).id;
    let state = core.snapshot();

    let mut restarted = Core::restore(config(2, GlobalPolicy::Gang), state, NOW_NS).unwrap();
    assert_eq!(restarted.epoch(), core.epoch() + 1);
    register(&mut restarted, 0, 10);
    register(&mut restarted, 1, 11);
    restarted.take_effects();
    // Node 0 runs both; node 1 restarted and runs neither, plus a stray job.
    inventory(&mut restarted, 0, &[kept, lost]);
    inventory(&mut restarted, 1, &[kept, 999]);
    let messages = sent(&restarted.take_effects());
    assert!(messages.contains(&(1, Message::CancelJob(CancelJob { job_id: 999 }))));
    let lost_view = restarted.job_view(lost).unwrap();
    assert_eq!(
        lost_view.ranks[1].state,
        "lost: the agent on n1 does not run it"
    );
    assert!(messages.contains(&(0, Message::CancelJob(CancelJob { job_id: lost }))));
    let kept_view = restarted.job_view(kept).unwrap();
    assert_eq!(kept_view.state, JobStateView::Running);
    assert!(kept_view.ranks.iter().all(|rank| rank.state == "running"));
    // The cancelled rank reports its end; the lost job leaves the matrix.
    restarted
        .job_exited(
            0,
            &JobExited {
                job_id: lost,
                rank: 0,
                status: ExitStatus::Signalled { signal: 9 },
            },
        )
        .unwrap();
    assert_eq!(
        restarted.job_view(lost).unwrap().state,
        JobStateView::Failed
    );
    assert_eq!(restarted.matrix().non_empty_rows(), vec![0]);
}

#[test]
fn restart_refuses_a_state_file_of_other_nodes() {
    let core = cluster(2, GlobalPolicy::Gang);
    let error = Core::restore(config(3, GlobalPolicy::Gang), core.snapshot(), NOW_NS).unwrap_err();
    assert!(error.contains("differ"), "{error}");
}

#[test]
fn queued_jobs_placed_on_a_node_that_never_registered_launch_once_it_does() {
    let mut core = Core::new(config(2, GlobalPolicy::Fcfs)).unwrap();
    register(&mut core, 0, 1);
    inventory(&mut core, 0, &[]);
    let first = submit(&mut core, job("first", 1)).id;
    // Queued: checked on the connected node only.
    let id = submit(&mut core, job("wide", 2)).id;
    core.take_effects();
    exit(&mut core, 0, first, 0, 0);
    assert_eq!(core.job_view(id).unwrap().state, JobStateView::Running);
    assert!(
        launches(&core.take_effects()).is_empty(),
        "n1's address is still unknown"
    );
    register(&mut core, 1, 2);
    inventory(&mut core, 1, &[]);
    let launched = launches(&core.take_effects());
    assert_eq!(launched.len(), 2);
    assert_eq!(
        core.job_view(id).unwrap().ranks[0].state,
        "launched",
        "n0 gets its rank too once every address is known"
    );
}

#[test]
fn switching_to_fcfs_is_refused_while_two_rows_are_used() {
    let mut core = cluster(2, GlobalPolicy::Gang);
    submit(&mut core, job("a", 2));
    submit(&mut core, job("b", 2));
    assert!(core.set_policy(GlobalPolicy::Fcfs, NOW_NS).is_err());
    assert_eq!(core.policy(), GlobalPolicy::Gang);
    core.take_effects();
    core.set_policy(GlobalPolicy::PairedGang, NOW_NS).unwrap();
    let messages = sent(&core.take_effects());
    assert_eq!(messages.len(), 2, "every agent is told: {messages:?}");
}

#[test]
fn switching_from_fcfs_to_gang_starts_queued_jobs() {
    let mut core = cluster(2, GlobalPolicy::Fcfs);
    submit(&mut core, job("a", 2));
    let queued = submit(&mut core, job("b", 2)).id;
    core.take_effects();
    core.set_policy(GlobalPolicy::Gang, NOW_NS).unwrap();
    assert_eq!(core.job_view(queued).unwrap().row, Some(1));
    assert_eq!(launches(&core.take_effects()).len(), 2);
}

#[test]
fn disconnected_nodes_get_no_switches() {
    let mut core = cluster(2, GlobalPolicy::Gang);
    submit(&mut core, job("a", 2));
    core.disconnected(1, 2);
    core.take_effects();
    core.plan_slice(1_000);
    let switched = switches(&core.take_effects());
    assert_eq!(switched.len(), 1);
    assert_eq!(switched[0].0, 0);
    assert!(
        core.disconnected(0, 99).is_empty(),
        "stale connection ids are ignored"
    );
    assert!(core.node(0).is_up());
}
