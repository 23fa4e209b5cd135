//! Best-effort and real-time jobs together: submission checks, admission,
//! placement and the policies' own broadcasts.

use cosched_proto::wire::{
    ClassSettings, DivisionClass, DivisionSwitched, FrameReport, JobFrames, SwitchDivision,
};

use super::*;
use crate::{
    config::{AdmissionKind, ClassesConfig},
    core::Observed,
};

/// A cluster whose nodes all registered and reconciled, under `policy`
/// with these `[classes]` settings.
pub(super) fn classes_cluster(nodes: usize, policy: GlobalPolicy, classes: ClassesConfig) -> Core {
    let mut config = config(nodes, policy);
    config.classes = classes;
    let mut core = Core::new(config).unwrap();
    for node in 0..nodes {
        register(&mut core, node, node as u64 + 1);
        inventory(&mut core, node, &[]);
    }
    core.take_effects();
    core
}

pub(super) fn rt(
    name: &str,
    nodes: usize,
    period_ns: u64,
    frames: u32,
    work_ns: u64,
) -> Submission {
    Submission {
        class: JobClass::RealTime {
            period_ns,
            frames,
            work_ns,
        },
        ..job(name, nodes)
    }
}

pub(super) fn observed(effects: &[Effect]) -> Vec<Observed> {
    effects
        .iter()
        .filter_map(|effect| match effect {
            Effect::Observed(observed) => Some(observed.clone()),
            _ => None,
        })
        .collect()
}

fn divisions(effects: &[Effect]) -> Vec<(usize, SwitchDivision)> {
    sent_of!(effects, Message::SwitchDivision)
}

const MS: u64 = 1_000_000;

#[test]
fn an_rt_job_with_zero_frames_is_refused_at_submit_and_nothing_is_kept() {
    let mut core = classes_cluster(2, GlobalPolicy::TwoDcsTdm, ClassesConfig::default());
    let error = core
        .submit(rt("video", 1, 10 * MS, 0, MS), 0, NOW_NS)
        .unwrap_err();
    assert!(error.contains("frames must be at least 1"), "{error}");
    let effects = core.take_effects();
    assert!(sent(&effects).is_empty(), "no agent was asked: {effects:?}");
    assert_eq!(
        observed(&effects),
        [Observed::RtRejected {
            reason: "invalid_spec"
        }]
    );
    assert!(core.jobs_view(true).is_empty());
    for bad in [
        rt("a", 1, 0, 1, 1),
        rt("b", 1, 10, 1, 0),
        rt("c", 1, 10, 1, 11),
    ] {
        assert!(core.submit(bad, 0, NOW_NS).is_err());
    }
    assert_eq!(submit(&mut core, job("next", 1)).id, 1, "no job id used");
}

#[test]
fn under_a_policy_without_classes_an_rt_job_is_refused_naming_the_policies_that_take_it() {
    let mut core = cluster(2, GlobalPolicy::Gang);
    let error = core
        .submit(rt("video", 1, 10 * MS, 2, MS), 0, NOW_NS)
        .unwrap_err();
    assert!(
        error.contains("one-level-gang, 2dcs-tdm or 2dcs-ps"),
        "{error}"
    );
    assert!(error.contains("runs gang"), "{error}");
    assert_eq!(
        observed(&core.take_effects()),
        [Observed::RtRejected { reason: "policy" }]
    );
    assert!(core.jobs_view(true).is_empty());
}

#[test]
fn under_2dcs_tdm_an_rt_job_past_the_admission_bound_is_rejected_with_the_bound_in_the_reason() {
    // One node, 2:1, Δ = 150 ms and no overheads: a window of 3 × 10 ms
    // gives the RT class 20 ms; each job needs 3 × 5 ms = 15 ms of it.
    let mut core = classes_cluster(1, GlobalPolicy::TwoDcsTdm, ClassesConfig::default());
    let first = submit(&mut core, rt("first", 1, 10 * MS, 3, 5 * MS));
    assert_eq!(first.state, JobStateView::Running);
    assert_eq!(first.admission.as_ref().unwrap().state, "admitted");
    let effects = core.take_effects();
    assert_eq!(launches(&effects).len(), 1);
    assert!(observed(&effects).contains(&Observed::RtAdmitted));
    let error = core
        .submit(rt("second", 1, 10 * MS, 3, 5 * MS), 0, NOW_NS)
        .unwrap_err();
    assert!(error.contains("rejected by admission control"), "{error}");
    assert!(error.contains("capacity of 20000000 ns"), "{error}");
    assert!(error.contains("15000000 ns of RT load"), "{error}");
    assert_eq!(
        observed(&core.take_effects()),
        [Observed::RtRejected {
            reason: "window_capacity"
        }]
    );
    assert_eq!(
        core.jobs_view(false).len(),
        1,
        "the rejected job is not kept"
    );
}

#[test]
fn under_2dcs_without_admission_control_every_rt_job_is_placed_one_rank_per_node() {
    let classes = ClassesConfig {
        admission: AdmissionKind::None,
        ..ClassesConfig::default()
    };
    let mut core = classes_cluster(3, GlobalPolicy::TwoDcsPs, classes);
    for name in ["a", "b", "c"] {
        let view = submit(&mut core, rt(name, 2, 10 * MS, 3, 9 * MS));
        assert_eq!(view.state, JobStateView::Running);
        let mut nodes = view.nodes.clone();
        nodes.dedup();
        assert_eq!(nodes.len(), 2, "one rank per node: {view:?}");
    }
    let error = core
        .submit(rt("wide", 4, 10 * MS, 3, MS), 0, NOW_NS)
        .unwrap_err();
    assert!(error.contains("4 nodes but the cluster has 3"), "{error}");
}

#[test]
fn under_2dcs_a_be_job_goes_to_the_nodes_with_the_fewest_be_jobs_and_nothing_queues() {
    let mut core = classes_cluster(3, GlobalPolicy::TwoDcsTdm, ClassesConfig::default());
    let first = submit(&mut core, job("a", 2));
    assert_eq!(first.nodes, ["n0", "n1"]);
    let second = submit(&mut core, job("b", 2));
    assert_eq!(second.nodes, ["n0", "n2"], "n2 had none, then the lowest");
    for _ in 0..5 {
        assert_eq!(
            submit(&mut core, job("more", 3)).state,
            JobStateView::Running
        );
    }
    assert!(core.matrix().has_no_placed_jobs(), "no Ousterhout matrix");
    let nodes = core.nodes_view();
    assert!(nodes[0].jobs.contains(&first.id) && nodes[0].jobs.contains(&second.id));
}

#[test]
fn divisions_are_broadcast_at_x_y_boundaries_to_every_ready_node_in_its_own_clock() {
    let mut core = classes_cluster(2, GlobalPolicy::TwoDcsTdm, ClassesConfig::default());
    // Node 1's clock is 1 ms ahead.
    clock_1ms_ahead(&mut core, 1);
    let start = 2_000 * MS;
    let planned = core.plan(start, SLICE_NS);
    // Δ = 150 ms split 2:1: 100 ms of RT, then 50 ms of BE.
    assert_eq!(planned.next_start_ns, start + 100 * MS);
    let effects = core.take_effects();
    assert!(switches(&effects).is_empty(), "no slices under 2dcs-tdm");
    let sent = divisions(&effects);
    assert_eq!(sent.len(), 2);
    for (node, division) in &sent {
        let offset = *node as u64 * MS;
        assert_eq!(division.class, DivisionClass::RealTime);
        assert_eq!(division.division, 0);
        assert_eq!(division.epoch, core.epoch());
        assert_eq!(division.apply_at_ns, start + offset);
        assert_eq!(division.ends_at_ns, start + 100 * MS + offset);
    }
    assert!(observed(&effects).contains(&Observed::DivisionSwitch {
        class: DivisionClass::RealTime
    }));
    let planned = core.plan(planned.next_start_ns, SLICE_NS);
    assert_eq!(planned.next_start_ns, start + 150 * MS);
    let sent = divisions(&core.take_effects());
    assert_eq!(sent[0].1.class, DivisionClass::BestEffort);
    assert_eq!(sent[0].1.division, 1);
    assert_eq!(sent[0].1.apply_at_ns, start + 100 * MS);
    assert_eq!(sent[1].1.ends_at_ns, start + 150 * MS + MS);
    // Both nodes report in their own clocks: the skew is 30 ns.
    let report = |at| DivisionSwitched {
        epoch: core.epoch(),
        division: 1,
        switched_at_ns: at,
    };
    let (first, second) = (report(start + 100 * MS + 10), report(start + 101 * MS + 40));
    core.division_switched(0, &first);
    core.division_switched(1, &second);
    let seen = observed(&core.take_effects());
    assert!(
        seen.contains(&Observed::DivisionSkew(SwitchObservation::Skew {
            seconds: 30e-9,
            nodes: 2
        })),
        "{seen:?}"
    );
    assert_eq!(core.status_view(100, 5_000).division_skew.samples, 1);
    let status = core.status_view(100, 5_000).classes.unwrap();
    assert_eq!(status.division.unwrap().class, "be");
}

#[test]
fn a_late_boundary_restarts_the_division_clock_with_an_rt_division_and_numbers_go_on() {
    let mut core = classes_cluster(1, GlobalPolicy::TwoDcsTdm, ClassesConfig::default());
    let planned = core.plan(1_000 * MS, SLICE_NS);
    core.take_effects();
    // The daemon fell behind and moved the boundary.
    let late = planned.next_start_ns + 7 * MS;
    let planned = core.plan(late, SLICE_NS);
    assert_eq!(planned.next_start_ns, late + 100 * MS);
    let sent = divisions(&core.take_effects());
    assert_eq!(sent[0].1.class, DivisionClass::RealTime);
    assert_eq!(sent[0].1.division, 1);
}

#[test]
fn a_node_ready_mid_division_hears_the_current_one_at_once() {
    let mut config = config(2, GlobalPolicy::TwoDcsTdm);
    config.classes = ClassesConfig::default();
    let mut core = Core::new(config).unwrap();
    register(&mut core, 0, 1);
    inventory(&mut core, 0, &[]);
    core.plan(1_000 * MS, SLICE_NS);
    core.take_effects();
    register(&mut core, 1, 2);
    let registered = sent(&core.take_effects());
    assert_eq!(
        registered,
        [
            (
                1,
                Message::SetPolicy(SetPolicy {
                    policy: "2dcs-tdm".into()
                })
            ),
            (
                1,
                Message::ClassSettings(ClassSettings {
                    ratio_rt: 2,
                    ratio_be: 1,
                    tdm_period_ns: 150 * MS
                })
            ),
        ]
    );
    inventory(&mut core, 1, &[]);
    let sent = divisions(&core.take_effects());
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].0, 1);
    assert_eq!(
        sent[0].1.apply_at_ns,
        1_000 * MS,
        "already due: applied now"
    );
}

#[test]
fn a_1_2_agent_is_refused_under_2dcs_tdm() {
    let mut core = Core::new(config(2, GlobalPolicy::TwoDcsTdm)).unwrap();
    let message = Register {
        node_name: "n0".into(),
        cpus: vec![0],
        agent_addr: "10.0.0.10:0".parse().unwrap(),
        metrics_addr: None,
    };
    let old = ProtocolVersion { major: 1, minor: 2 };
    let error = core
        .register(&message, "127.0.0.1".parse().unwrap(), 1, old)
        .unwrap_err();
    assert!(error.contains("runs 2dcs-tdm"), "{error}");
    assert!(error.contains("protocol 1.3"), "{error}");
    assert!(error.contains("speaks 1.2"), "{error}");
    assert!(!core.node(0).is_up());
    assert!(core.take_effects().is_empty());
}

#[test]
fn a_switch_to_a_policy_with_classes_is_refused_while_a_1_2_agent_is_connected() {
    let mut core = Core::new(config(2, GlobalPolicy::Gang)).unwrap();
    register(&mut core, 0, 1);
    register_speaking(&mut core, 1, 2, ProtocolVersion { major: 1, minor: 2 });
    core.take_effects();
    let error = core.set_policy(GlobalPolicy::TwoDcsPs, NOW_NS).unwrap_err();
    assert!(error.contains("n1 (1.2)"), "{error}");
    assert_eq!(core.policy(), GlobalPolicy::Gang);
    assert!(core.take_effects().is_empty());
}

#[test]
fn frame_reports_show_the_miss_rate_and_reports_for_other_jobs_are_ignored() {
    let mut core = classes_cluster(2, GlobalPolicy::TwoDcsPs, ClassesConfig::default());
    let id = submit(&mut core, rt("video", 2, 10 * MS, 2, MS)).id;
    let be = submit(&mut core, job("batch", 1)).id;
    let counts = |job_id, missed| JobFrames {
        job_id,
        frames: 400,
        expected: 400,
        met: 400 - missed,
        missed,
        satisfied: true,
        work_p95_ns: Some(800_000),
        work_mean_ns: None,
        work_sd_ns: None,
        ready: false,
    };
    for (node, missed) in [(0, 2), (1, 6)] {
        let report = FrameReport {
            jobs: vec![counts(id, missed)],
        };
        core.frame_report(node, &report).unwrap();
    }
    let frames = core.job_view(id).unwrap().frames.unwrap();
    assert_eq!((frames.expected, frames.missed), (800, 8));
    assert_eq!(frames.miss_rate_percent, Some(1.0));
    assert_eq!(frames.work_p95_ns, Some(800_000));
    let stray = FrameReport {
        jobs: vec![counts(be, 0), counts(99, 0)],
    };
    let error = core.frame_report(0, &stray).unwrap_err();
    assert!(error.contains(&format!("[{be}, 99]")), "{error}");
    assert!(core.job_view(be).unwrap().frames.is_none());
}

#[test]
fn under_probabilistic_admission_the_work_agents_measured_admits_a_job_its_declaration_does_not() {
    // One node, 2:1: the RT share is 66.7 %. Jobs declare 2 ms every 10 ms
    // (20 %): three fit, a fourth does not while nothing is measured.
    let classes = ClassesConfig {
        admission: AdmissionKind::Probabilistic,
        ..ClassesConfig::default()
    };
    let mut core = classes_cluster(1, GlobalPolicy::TwoDcsTdm, classes);
    let ids: Vec<u32> = ["a", "b", "c"]
        .iter()
        .map(|name| submit(&mut core, rt(name, 1, 10 * MS, 3, 2 * MS)).id)
        .collect();
    core.take_effects();
    let error = core
        .submit(rt("d", 1, 10 * MS, 3, 2 * MS), 0, NOW_NS)
        .unwrap_err();
    assert!(error.contains("with probability over 10000 ppm"), "{error}");
    assert_eq!(
        observed(&core.take_effects()),
        [Observed::RtRejected { reason: "overload" }]
    );
    // Their agent measured 1.2 ms ± 50 µs per frame over 400 frames: 36 %,
    // and the newcomer counts for 12 % ± 0.5 %.
    let measured = |job_id| JobFrames {
        job_id,
        frames: 400,
        expected: 390,
        met: 390,
        missed: 0,
        satisfied: true,
        work_p95_ns: Some(1_300_000),
        work_mean_ns: Some(1_200_000),
        work_sd_ns: Some(50_000),
        ready: true,
    };
    let report = FrameReport {
        jobs: ids.iter().map(|&id| measured(id)).collect(),
    };
    core.frame_report(0, &report).unwrap();
    let admitted = submit(&mut core, rt("d", 1, 10 * MS, 3, 2 * MS));
    assert_eq!(admitted.state, JobStateView::Running);
}

#[test]
fn an_ended_rt_job_keeps_the_last_counts_its_agents_sent_before_its_exits() {
    let mut core = classes_cluster(2, GlobalPolicy::TwoDcsTdm, ClassesConfig::default());
    let id = submit(&mut core, rt("video", 2, 10 * MS, 2, MS)).id;
    let ranks: Vec<(usize, u32)> = core
        .job_view(id)
        .unwrap()
        .ranks
        .iter()
        .map(|rank| (rank.node[1..].parse().unwrap(), rank.rank))
        .collect();
    for &(node, rank) in &ranks {
        let report = FrameReport {
            jobs: vec![JobFrames {
                job_id: id,
                frames: 100,
                expected: 100,
                met: 99,
                missed: 1,
                satisfied: false,
                work_p95_ns: None,
                work_mean_ns: None,
                work_sd_ns: None,
                ready: false,
            }],
        };
        core.frame_report(node, &report).unwrap();
        exit(&mut core, node, id, rank, 0);
    }
    let view = core.job_view(id).unwrap();
    assert_eq!(view.state.as_str(), "completed", "{view:?}");
    let frames = view.frames.expect("kept after the job ended");
    assert_eq!((frames.expected, frames.missed), (200, 2));
}

#[test]
fn switching_to_a_policy_without_classes_while_rt_jobs_run_is_refused_naming_them() {
    let mut core = classes_cluster(2, GlobalPolicy::TwoDcsTdm, ClassesConfig::default());
    let video = submit(&mut core, rt("video", 1, 10 * MS, 3, MS)).id;
    submit(&mut core, job("batch", 2));
    core.take_effects();
    let error = core.set_policy(GlobalPolicy::Gang, NOW_NS).unwrap_err();
    assert!(
        error.contains(&format!("job {video} (video, rt(")),
        "{error}"
    );
    assert!(error.contains("2dcs-tdm stays"), "{error}");
    assert_eq!(core.policy(), GlobalPolicy::TwoDcsTdm);
    assert!(core.take_effects().is_empty());
    core.cancel(video).unwrap();
    core.set_policy(GlobalPolicy::Gang, NOW_NS).unwrap();
    assert_eq!(core.policy(), GlobalPolicy::Gang);
    assert_eq!(
        core.matrix().placed_jobs().count(),
        1,
        "the BE job keeps its nodes"
    );
}

#[test]
fn a_policy_switch_that_would_break_an_admitted_rt_jobs_guarantee_is_refused() {
    // 2DCS-PS admits 3 × 6 ms of load in a 30 ms window at 2:1 (capacity
    // 20 ms); 2DCS-TDM also loses the division switches (σ = 5 ms per 150
    // ms): 30·(2/3 − 1/30) − 5 = 14 ms, less than the 18 ms the job needs.
    let classes = ClassesConfig {
        division_switch_cost_us: 5_000,
        ..ClassesConfig::default()
    };
    let mut core = classes_cluster(1, GlobalPolicy::TwoDcsPs, classes);
    let id = submit(&mut core, rt("video", 1, 10 * MS, 3, 6 * MS)).id;
    core.take_effects();
    let error = core
        .set_policy(GlobalPolicy::TwoDcsTdm, NOW_NS)
        .unwrap_err();
    assert!(error.contains(&format!("job {id} (video")), "{error}");
    assert!(
        error.contains("no longer passes deterministic admission"),
        "{error}"
    );
    assert!(error.contains("where it runs"), "{error}");
    assert_eq!(core.policy(), GlobalPolicy::TwoDcsPs);
    assert!(
        core.take_effects().is_empty(),
        "nothing sent, nothing persisted"
    );
    // A lighter job passes both: the switch goes through and every agent is
    // told the policy and the settings.
    core.cancel(id).unwrap();
    submit(&mut core, rt("light", 1, 10 * MS, 3, 3 * MS));
    core.take_effects();
    core.set_policy(GlobalPolicy::TwoDcsTdm, NOW_NS).unwrap();
    let messages = sent(&core.take_effects());
    assert!(matches!(messages[0].1, Message::SetPolicy(_)));
    assert!(matches!(messages[1].1, Message::ClassSettings(_)));
}

#[test]
fn switching_from_gang_to_2dcs_keeps_running_jobs_where_they_run_and_starts_queued_ones() {
    let mut core = Core::new(CoreConfig {
        max_rows: 1,
        ..config(2, GlobalPolicy::Gang)
    })
    .unwrap();
    for node in 0..2 {
        register(&mut core, node, node as u64 + 1);
        inventory(&mut core, node, &[]);
    }
    let running = submit(&mut core, job("a", 1));
    let queued = submit(&mut core, job("b", 2));
    assert_eq!(queued.state, JobStateView::Queued);
    core.take_effects();
    core.set_policy(GlobalPolicy::TwoDcsPs, NOW_NS).unwrap();
    assert_eq!(core.job_view(running.id).unwrap().nodes, running.nodes);
    assert_eq!(
        core.job_view(queued.id).unwrap().state,
        JobStateView::Running
    );
    assert_eq!(launches(&core.take_effects()).len(), 2);
    assert!(core.matrix().has_no_placed_jobs());
    let status = core.status_view(100, 5_000);
    assert_eq!(status.classes.unwrap().ratio, "2:1");
}

#[test]
fn changed_class_settings_that_a_running_job_could_not_keep_are_refused() {
    let mut core = classes_cluster(1, GlobalPolicy::TwoDcsTdm, ClassesConfig::default());
    submit(&mut core, rt("video", 1, 10 * MS, 3, 6 * MS));
    core.take_effects();
    let tighter = ClassesConfig {
        ratio: cosched_policy::classes::FairnessRatio::new(1, 1).unwrap(),
        ..ClassesConfig::default()
    };
    let error = core.set_classes(tighter, NOW_NS).unwrap_err();
    assert!(error.contains("no longer passes"), "{error}");
    assert_eq!(core.status_view(100, 5_000).classes.unwrap().ratio, "2:1");
    let looser = ClassesConfig {
        ratio: cosched_policy::classes::FairnessRatio::new(3, 1).unwrap(),
        ..ClassesConfig::default()
    };
    core.set_classes(looser, NOW_NS).unwrap();
    assert_eq!(core.status_view(100, 5_000).classes.unwrap().ratio, "3:1");
    let told = sent(&core.take_effects());
    assert!(told.contains(&(
        0,
        Message::ClassSettings(ClassSettings {
            ratio_rt: 3,
            ratio_be: 1,
            tdm_period_ns: 150 * MS
        })
    )));
}

#[test]
fn attached_jobs_under_2dcs_pass_admission_where_their_launcher_put_them() {
    let mut core = classes_cluster(2, GlobalPolicy::TwoDcsTdm, ClassesConfig::default());
    submit(&mut core, rt("resident", 1, 10 * MS, 3, 6 * MS));
    let attach = |class| crate::admin::protocol::Attachment {
        name: "mpi".into(),
        nodes: vec!["n0".into()],
        command: vec!["mpirun".into()],
        class,
        exclusive: false,
    };
    let heavy = JobClass::RealTime {
        period_ns: 10 * MS,
        frames: 3,
        work_ns: 6 * MS,
    };
    let error = core.attach(attach(heavy.clone()), 0).unwrap_err();
    assert!(error.contains("where it runs"), "{error}");
    let view = core.attach(attach(JobClass::BestEffort), 0).unwrap();
    assert_eq!(view.nodes, ["n0"]);
    let mut one_gs = classes_cluster(2, GlobalPolicy::OneLevelGang, ClassesConfig::default());
    let error = one_gs.attach(attach(JobClass::BestEffort), 0).unwrap_err();
    assert!(error.contains("chooses a job's nodes itself"), "{error}");
}
