//! One-level gang scheduling (1GS) driven by the coordinator: its rows as
//! slices, waits and evictions, replication and the satisfied set, restarts.

use cosched_proto::wire::{FrameReport, JobFrames};

use super::classes::{classes_cluster, observed, rt};
use super::*;
use crate::{
    config::{AdmissionKind, ClassesConfig},
    core::Observed,
};

const MS: u64 = 1_000_000;

/// M = 3 rows at 2:1 (rows 0 and 1 RT, row 2 BE), 100 ms slots: Ψ = 300 ms.
fn one_gs(nodes: usize) -> Core {
    classes_cluster(nodes, GlobalPolicy::OneLevelGang, ClassesConfig::default())
}

/// d = 100 ms, b = 30 (Γ = 3 s, a multiple of Ψ: in phase), τ = 40 ms: r = ⌈300 · 40 / (100 · 100)⌉ = 2 rows.
fn heavy(name: &str, nodes: usize) -> Submission {
    rt(name, nodes, 100 * MS, 30, 40 * MS)
}

/// τ = 10 ms: one row is enough.
fn light(name: &str, nodes: usize) -> Submission {
    rt(name, nodes, 100 * MS, 30, 10 * MS)
}

#[test]
fn under_1gs_an_rt_job_that_needs_more_rows_waits_and_is_evicted_after_w() {
    let mut core = one_gs(2);
    let first = submit(&mut core, heavy("first", 2));
    assert_eq!(first.state, JobStateView::Running);
    assert_eq!(first.rows_held, [0, 1], "r = 2 rows of the RT set");
    assert!(
        first.guarantee.as_ref().unwrap().contains("(met)"),
        "{first:?}"
    );
    let second = submit(&mut core, heavy("second", 2));
    assert_eq!(second.state, JobStateView::Queued);
    assert_eq!(second.queue_position, Some(0));
    assert_eq!(second.admission.as_ref().unwrap().state, "waiting");
    core.take_effects();
    let w = ClassesConfig::default().rt_max_wait_ms * MS;
    assert_eq!(core.next_eviction_ns(), Some(NOW_NS + w));
    core.evict_expired(NOW_NS + w - 1);
    assert_eq!(
        core.job_view(second.id).unwrap().state,
        JobStateView::Queued
    );
    core.evict_expired(NOW_NS + w);
    let evicted = core.job_view(second.id).unwrap();
    assert_eq!(evicted.state, JobStateView::Failed);
    let reason = evicted.reason.unwrap();
    assert!(
        reason.starts_with("evicted: waited 30000 ms for 2 rows"),
        "{reason}"
    );
    let admission = evicted.admission.unwrap();
    assert_eq!(admission.state, "rejected");
    assert_eq!(admission.reason.as_deref(), Some(reason.as_str()));
    let effects = core.take_effects();
    assert_eq!(observed(&effects), [Observed::RtEvicted]);
    assert!(launches(&effects).is_empty(), "it never ran");
    assert_eq!(core.next_eviction_ns(), None);
    assert_eq!(core.jobs_view(false).len(), 1);
}

#[test]
fn under_1gs_a_late_planning_loop_keeps_the_slice_grid_rt_frames_are_placed_on() {
    use crate::core::slicing::resume_at;
    // Per-slice switches (no schedules ahead, as in this config): a gang
    // rotation moves a switch planned late to a full lead from now, and
    // every later one with it.
    let gang = Core::new(config(2, GlobalPolicy::Gang)).unwrap();
    assert!(!gang.keeps_slice_grid());
    let (lead, slice) = (5 * MS, 10 * MS);
    assert_eq!(
        resume_at(100 * MS, 98 * MS, lead, slice, gang.keeps_slice_grid()),
        103 * MS
    );
    // 1GS keeps the grid: an admitted RT job's rows stay where its frames
    // were placed (first-frame instant, cycle against window), the late
    // switch is applied on arrival (strict), and the next one is on time.
    let core = one_gs(2);
    assert!(core.keeps_slice_grid());
    assert_eq!(
        resume_at(100 * MS, 98 * MS, lead, slice, core.keeps_slice_grid()),
        100 * MS
    );
    assert_eq!(
        resume_at(100 * MS, 103 * MS, lead, slice, core.keeps_slice_grid()),
        100 * MS,
        "even past its start"
    );
}

#[test]
fn under_1gs_a_waiting_rt_job_starts_when_a_running_one_leaves() {
    let mut core = one_gs(2);
    let first = submit(&mut core, heavy("first", 2)).id;
    let second = submit(&mut core, heavy("second", 2)).id;
    core.take_effects();
    exit(&mut core, 0, first, 0, 0);
    exit(&mut core, 1, first, 1, 0);
    let view = core.job_view(second).unwrap();
    assert_eq!(view.state, JobStateView::Running);
    assert_eq!(view.admission.unwrap().state, "admitted");
    let mut effects = core.take_effects();
    assert!(observed(&effects).contains(&Observed::RtAdmitted));
    // No slice runs yet: its ranks are launched after the first one.
    core.plan_slice(NOW_NS);
    effects.extend(core.take_effects());
    assert_eq!(launches(&effects).len(), 2);
}

#[test]
fn under_1gs_a_job_submitted_while_no_slice_runs_is_launched_after_the_first_slice() {
    // An empty matrix sends no slices: agents leave gang mode and would run
    // a rank launched now at once, before any slice holds it (an RT job's
    // first frame, which starts its windows, outside its start row).
    let mut core = one_gs(2);
    let video = submit(&mut core, heavy("video", 2)).id;
    let effects = core.take_effects();
    assert!(launches(&effects).is_empty(), "held until a slice runs");
    assert_eq!(
        core.job_view(video).unwrap().state,
        JobStateView::Running,
        "admitted, only its launch waits"
    );
    core.plan_slice(NOW_NS);
    let effects = core.take_effects();
    let messages = sent(&effects);
    let first_launch = messages
        .iter()
        .position(|(_, m)| matches!(m, Message::LaunchJob(_)))
        .expect("launched after the slice");
    let first_switch = messages
        .iter()
        .position(|(_, m)| matches!(m, Message::SwitchSlice(_)))
        .expect("a slice");
    assert!(
        first_switch < first_launch,
        "the slice reaches the agents first"
    );
    assert_eq!(launches(&effects).len(), 2, "one rank per node");
    // The slice holds the RT job (its start row is row 1): the agents stop
    // its ranks as they register.
    assert!(
        switches(&effects)
            .iter()
            .all(|(_, s)| !s.active_jobs.contains(&video))
    );
    // A job submitted while slices run is launched at once.
    let batch = submit(&mut core, job("batch", 2)).id;
    let effects = core.take_effects();
    assert!(launches(&effects).iter().all(|(_, l)| l.job_id == batch));
    assert_eq!(launches(&effects).len(), 2);
}

#[test]
fn under_1gs_an_rt_job_needing_more_rows_than_the_rt_set_is_refused_at_once() {
    let mut core = one_gs(2);
    // τ = 80 ms: r = ⌈300 · 80 / 10000⌉ = 3 rows, the RT set has 2.
    let error = core
        .submit(rt("greedy", 1, 100 * MS, 30, 80 * MS), 0, NOW_NS)
        .unwrap_err();
    assert!(error.contains("need 3 rows"), "{error}");
    assert!(error.contains("the set has 2"), "{error}");
    assert_eq!(
        observed(&core.take_effects()),
        [Observed::RtRejected { reason: "rows" }]
    );
    assert!(core.jobs_view(true).is_empty());
}

#[test]
fn under_1gs_slices_run_its_rows_in_turn_with_each_rows_job_on_its_nodes() {
    let mut core = one_gs(2);
    let video = submit(&mut core, heavy("video", 1)).id;
    let batch = submit(&mut core, job("batch", 2)).id;
    core.take_effects();
    let mut seen = Vec::new();
    for slice in 0..6u64 {
        if slice == 2 {
            // Its rank started up in row 1 and published its counter.
            core.frame_report(0, &ready(video)).unwrap();
        }
        core.plan_slice(NOW_NS + slice * SLICE_NS);
        let switched = switches(&core.take_effects());
        assert_eq!(switched.len(), 2, "every ready node");
        assert!(switched.iter().all(|(_, switch)| switch.strict));
        seen.push((
            switched[0].1.rows.clone(),
            switched[0].1.active_jobs.clone(),
        ));
    }
    // Rows 0 and 1 hold the RT job (on n0; the BE job's replica fills n1),
    // row 2 the BE job. The RT job first runs in row 1, after row 0 has
    // drained what the gap leaves (its start row), then in both.
    assert_eq!(seen[0].0, [0]);
    assert_eq!(seen[2], (vec![2], vec![batch]));
    assert!(!seen[0].1.contains(&video) && seen[1].1.contains(&video));
    assert!(seen[3].1.contains(&video) && seen[4].1.contains(&video));
    let matrix = core.matrix_view();
    assert_eq!(matrix.row_classes, ["rt", "rt", "be"]);
    assert_eq!(matrix.cells[0][0], Some(video));
}

#[test]
fn under_1gs_a_new_rt_job_runs_in_its_start_row_alone_until_every_node_reports_it_ready() {
    let mut core = one_gs(2);
    let video = submit(&mut core, heavy("video", 2)).id;
    core.take_effects();
    let runs = |core: &mut Core, from: u64, count: u64| -> Vec<(u32, bool)> {
        (from..from + count)
            .map(|slice| {
                core.plan_slice(NOW_NS + slice * SLICE_NS);
                let switched = switches(&core.take_effects());
                (
                    switched[0].1.rows[0],
                    switched[0].1.active_jobs.contains(&video),
                )
            })
            .collect()
    };
    // Rows 0 and 1 of M = 3; start row 1. Its ranks still start up: row 1
    // only, round after round.
    assert_eq!(
        runs(&mut core, 0, 6),
        [
            (0, false),
            (1, true),
            (2, false),
            (0, false),
            (1, true),
            (2, false)
        ]
    );
    core.frame_report(0, &ready(video)).unwrap();
    assert_eq!(
        runs(&mut core, 6, 3),
        [(0, false), (1, true), (2, false)],
        "one node of two is ready"
    );
    core.frame_report(1, &ready(video)).unwrap();
    assert_eq!(
        runs(&mut core, 9, 3),
        [(0, true), (1, true), (2, false)],
        "both rows once every node is ready"
    );
}

#[test]
fn under_1gs_rt_jobs_every_node_reports_satisfied_are_no_longer_replicated() {
    // Without admission control: an admitted job's own rows pay for its
    // frames and it is never copied.
    let mut core = classes_cluster(
        2,
        GlobalPolicy::OneLevelGang,
        ClassesConfig {
            admission: AdmissionKind::None,
            ..ClassesConfig::default()
        },
    );
    let video = submit(&mut core, light("video", 2)).id;
    assert!(
        !core.job_view(video).unwrap().replica_rows.is_empty(),
        "idle rows get copies of an RT job short of its frames"
    );
    let satisfied = |satisfied| FrameReport {
        jobs: vec![JobFrames {
            job_id: video,
            frames: 10,
            expected: 10,
            met: 10,
            missed: 0,
            satisfied,
            work_p95_ns: None,
            work_mean_ns: None,
            work_sd_ns: None,
            ready: false,
        }],
    };
    core.frame_report(0, &satisfied(true)).unwrap();
    core.frame_report(1, &satisfied(false)).unwrap();
    submit(&mut core, job("batch", 1));
    assert!(
        !core.job_view(video).unwrap().replica_rows.is_empty(),
        "one node still short: replicated"
    );
    core.frame_report(1, &satisfied(true)).unwrap();
    submit(&mut core, job("batch2", 1));
    assert_eq!(
        core.job_view(video).unwrap().replica_rows,
        Vec::<usize>::new()
    );
}

#[test]
fn a_restart_under_1gs_keeps_its_matrix_and_queues() {
    let mut core = one_gs(2);
    let running = submit(&mut core, heavy("running", 2));
    let waiting = submit(&mut core, heavy("waiting", 2));
    let state = core.snapshot();
    assert!(state.one_gs.is_some());
    let text = serde_json::to_string(&state).unwrap();
    let mut config = config(2, GlobalPolicy::OneLevelGang);
    config.classes = ClassesConfig::default();
    let restarted = Core::restore(config, serde_json::from_str(&text).unwrap(), NOW_NS).unwrap();
    assert_eq!(restarted.job_view(running.id).unwrap().rows_held, [0, 1]);
    assert_eq!(
        restarted.job_view(waiting.id).unwrap().queue_position,
        Some(0)
    );
    assert_eq!(restarted.next_eviction_ns(), core.next_eviction_ns());
}

#[test]
fn a_restart_with_the_1gs_state_missing_is_refused() {
    let mut core = one_gs(2);
    submit(&mut core, heavy("running", 2));
    let mut state = core.snapshot();
    state.one_gs = None;
    let mut config = config(2, GlobalPolicy::OneLevelGang);
    config.classes = ClassesConfig::default();
    let error = Core::restore(config, state, NOW_NS).unwrap_err();
    assert!(error.contains("without its matrix"), "{error}");
}

#[test]
fn a_restart_under_another_policy_takes_the_jobs_over_as_a_switch_would() {
    let mut core = one_gs(2);
    submit(&mut core, heavy("video", 1));
    let state = core.snapshot();
    // Configured gang now: the RT job cannot continue under it.
    let error = Core::restore(config(2, GlobalPolicy::Gang), state.clone(), NOW_NS).unwrap_err();
    assert!(
        error.contains("cannot continue under the configured policy"),
        "{error}"
    );
    let mut config = config(2, GlobalPolicy::TwoDcsPs);
    config.classes = ClassesConfig::default();
    let restarted = Core::restore(config, state, NOW_NS).unwrap();
    assert_eq!(restarted.policy(), GlobalPolicy::TwoDcsPs);
    assert_eq!(restarted.jobs_view(false)[0].nodes, ["n0"]);
}

#[test]
fn switching_from_1gs_to_2dcs_keeps_its_jobs_and_waiting_ones_are_admitted_or_refuse_it() {
    let mut core = one_gs(2);
    let first = submit(&mut core, heavy("first", 2)).id;
    let second = submit(&mut core, heavy("second", 2)).id;
    core.take_effects();
    // 2DCS-TDM with 2:1 and a 100 ms window: 66 ms of RT capacity per node;
    // each job loads 40 ms, so the waiting one does not fit beside the
    // running one and the switch is refused.
    let error = core
        .set_policy(GlobalPolicy::TwoDcsTdm, NOW_NS)
        .unwrap_err();
    assert!(error.contains(&format!("job {second} (second")), "{error}");
    assert!(error.contains("(waiting) would be refused"), "{error}");
    assert_eq!(core.policy(), GlobalPolicy::OneLevelGang);
    core.cancel(second).unwrap();
    core.set_policy(GlobalPolicy::TwoDcsTdm, NOW_NS).unwrap();
    assert_eq!(core.job_view(first).unwrap().nodes, ["n0", "n1"]);
    assert_eq!(core.job_view(first).unwrap().rows_held, Vec::<usize>::new());
}

#[test]
fn new_settings_that_leave_the_1gs_matrix_as_it_is_are_only_recorded_and_sent() {
    let mut core = one_gs(2);
    let running = submit(&mut core, heavy("running", 2));
    core.take_effects();
    let epoch = core.epoch();
    let longer = ClassesConfig {
        tdm_period_ms: 300,
        rt_max_wait_ms: 5_000,
        ..ClassesConfig::default()
    };
    core.set_classes(longer, NOW_NS).unwrap();
    assert_eq!(core.epoch(), epoch, "no re-placement, same epoch");
    let told = sent(&core.take_effects());
    assert_eq!(told.len(), 2, "{told:?}");
    assert!(told.iter().all(|(_, message)| matches!(
        message,
        Message::ClassSettings(settings) if settings.tdm_period_ns == 300 * MS
    )));
    assert_eq!(core.job_view(running.id).unwrap().rows_held, [0, 1]);
    let waiting = submit(&mut core, heavy("waiting", 2));
    assert_eq!(core.next_eviction_ns(), Some(NOW_NS + 5_000 * MS));
    // More rows and a larger RT part change the matrix: the jobs arrive
    // again and keep their nodes. 10 rows at 9:1 give the RT class 9; each
    // job needs ⌈1000 · 40 / 10000⌉ = 4, so the waiting one fits too.
    let wider = ClassesConfig {
        one_gs_rows: 10,
        ratio: cosched_policy::classes::FairnessRatio::new(9, 1).unwrap(),
        ..ClassesConfig::default()
    };
    core.set_classes(wider, NOW_NS).unwrap();
    assert_eq!(core.epoch(), epoch + 1);
    assert_eq!(
        core.job_view(waiting.id).unwrap().state,
        JobStateView::Running
    );
    assert_eq!(core.job_view(running.id).unwrap().nodes, ["n0", "n1"]);
}

#[test]
fn under_1gs_an_rt_jobs_first_frame_instant_is_sent_once_in_its_start_row_after_every_node_is_ready()
 {
    let mut core = one_gs(2);
    let video = submit(&mut core, heavy("video", 2)).id;
    let batch = submit(&mut core, job("batch", 2)).id;
    core.take_effects();
    core.plan_slice(NOW_NS);
    let launched = launches(&core.take_effects());
    let wait = |id| {
        launched
            .iter()
            .filter(|(_, l)| l.job_id == id)
            .map(|(_, l)| l.first_frame_wait_ns)
            .collect::<Vec<_>>()
    };
    // 2 windows of 3 s in 300 ms cycles, and 2 cycles more.
    assert_eq!(wait(video), [Some(22 * 300 * MS); 2], "a pending gate");
    assert_eq!(wait(batch), [None; 2], "best effort: no gate");
    let mut told = Vec::new();
    for slice in 1..12u64 {
        if slice == 4 {
            core.frame_report(0, &ready(video)).unwrap();
            core.frame_report(1, &ready(video)).unwrap();
        }
        let start = NOW_NS + slice * SLICE_NS;
        core.plan_slice(start);
        let effects = core.take_effects();
        let row = switches(&effects)[0].1.rows[0];
        for (node, message) in sent(&effects) {
            if let Message::FirstFrameAt(first) = message {
                told.push((slice, row, node, first.job_id, first.at_ns - start));
            }
        }
    }
    // Ready before slice 4 (row 1) is planned: that slice gives it. The
    // instant lies in the row with room for a frame of τ = 40 ms after it.
    assert_eq!(told.len(), 2, "{told:?}");
    assert!(
        told.iter().all(|&(slice, row, _, job, offset)| {
            slice == 4 && row == 1 && job == video && offset < SLICE_NS - 40 * MS
        }),
        "{told:?}"
    );
    assert_eq!(told[0].4, told[1].4);
    assert_ne!(told[0].2, told[1].2, "one per node");
}
