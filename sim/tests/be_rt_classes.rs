//! The BE/RT schemes of `cosched_policy::classes` over a job stream
//! (issue 15 item 1): admission, the x:y shares and the frame accounting.

use cosched_policy::classes::{AdmissionRule, FairnessRatio, RtSpec};
use cosched_sim::classes::{ClassScheme, ClassSimParams, simulate_class_jobs, simulate_classes};

mod support;

use support::{MS, be, rt};

fn two_nodes(ratio: FairnessRatio, admission: AdmissionRule) -> ClassSimParams {
    ClassSimParams {
        nodes: 2,
        ratio,
        division_ns: 10 * MS,
        admission,
        ..ClassSimParams::default()
    }
}

#[test]
fn under_2dcs_tdm_admitted_rt_jobs_miss_no_frame_beside_a_backlogged_be_job() {
    // Two RT jobs that together fill the RT half of each 40 ms window (2 ×
    // 2 frames × 5 ms = 20 ms of 40), admitted, and a BE job that always
    // wants the CPU: the RT division is enough for every frame.
    let spec = RtSpec::new(20 * MS, 2, 5 * MS).unwrap();
    let params = two_nodes(FairnessRatio { rt: 1, be: 1 }, AdmissionRule::Deterministic);
    let jobs = [
        be(0, 0, 2, 10_000 * MS),
        rt(1, 0, 2, spec, 50),
        rt(2, 0, 2, spec, 50),
    ];
    let report = simulate_class_jobs(&params, &jobs);
    assert_eq!(report.rt_rejected, 0);
    assert_eq!(report.rt_frames_expected, 2 * 2 * 50 * 2);
    assert_eq!(report.rt_frames_missed, 0, "{report:?}");
}

#[test]
fn under_2dcs_tdm_an_rt_job_past_the_admission_bound_is_rejected_and_without_admission_misses() {
    // One node, RT share 1/2 of a 40 ms window = 20 ms; a job of 2 × 12 ms
    // per window is past it.
    let spec = RtSpec::new(20 * MS, 2, 12 * MS).unwrap();
    let jobs = [be(0, 0, 1, 10_000 * MS), rt(1, 0, 1, spec, 20)];
    let mut params = two_nodes(FairnessRatio { rt: 1, be: 1 }, AdmissionRule::Deterministic);
    params.nodes = 1;
    let admitted = simulate_class_jobs(&params, &jobs);
    assert_eq!((admitted.rt_jobs, admitted.rt_rejected), (1, 1));
    assert_eq!(admitted.rt_frames_expected, 0);

    params.admission = AdmissionRule::None;
    let unchecked = simulate_class_jobs(&params, &jobs);
    assert_eq!(unchecked.rt_rejected, 0);
    assert!(unchecked.rt_frames_missed > 0, "{unchecked:?}");
}

#[test]
fn under_2dcs_tdm_both_classes_backlogged_get_their_x_to_y_shares() {
    // RT processes that need the whole CPU (τ = d) and BE work that never
    // ends within the run: each class keeps its own division, 3:1.
    let spec = RtSpec::new(20 * MS, 2, 20 * MS).unwrap();
    let params = two_nodes(FairnessRatio { rt: 3, be: 1 }, AdmissionRule::None);
    let jobs = [be(0, 0, 2, 1_000_000 * MS), rt(1, 0, 2, spec, 100)];
    let report = simulate_class_jobs(&params, &jobs);
    // The run goes on until the BE job ends; judge the RT job's 4 s.
    let rt_share = report.rt_cpu_ns as f64 / (2.0 * 4_000.0 * MS as f64);
    assert!((rt_share - 0.75).abs() < 0.01, "RT share {rt_share}");
    assert_eq!(report.rt_lent_ns, 0);
    assert_eq!(report.idle_ns, 0);
}

#[test]
fn under_2dcs_tdm_an_idle_division_is_lent_to_the_other_class() {
    // BE alone: it gets the RT division too (lent), and nothing idles
    // until it ends.
    let params = two_nodes(FairnessRatio { rt: 1, be: 1 }, AdmissionRule::Deterministic);
    let report = simulate_class_jobs(&params, &[be(0, 0, 2, 100 * MS)]);
    assert_eq!(report.be_cpu_ns, 2 * 100 * MS);
    assert_eq!(report.be_lent_ns, 2 * 50 * MS);
    assert!((report.be_mean_response_s - 0.1).abs() < 1e-9);
}

#[test]
fn a_class_stream_gives_the_same_report_for_the_same_seed_and_another_for_another() {
    let params = ClassSimParams {
        jobs: 60,
        arrival_rate_per_s: 8.0,
        be_work_mean_ns: 200 * MS,
        ..ClassSimParams::default()
    };
    let a = serde_json::to_string(&simulate_classes(&params)).unwrap();
    let b = serde_json::to_string(&simulate_classes(&params)).unwrap();
    assert_eq!(a, b);
    let other =
        serde_json::to_string(&simulate_classes(&ClassSimParams { seed: 2, ..params })).unwrap();
    assert_ne!(a, other);
}

#[test]
fn under_2dcs_ps_both_classes_backlogged_share_each_node_x_to_y_by_virtual_time() {
    let spec = RtSpec::new(20 * MS, 2, 20 * MS).unwrap();
    let params = ClassSimParams {
        scheme: ClassScheme::TwoDcsPs,
        ..two_nodes(FairnessRatio { rt: 1, be: 3 }, AdmissionRule::None)
    };
    let jobs = [be(0, 0, 2, 1_000_000 * MS), rt(1, 0, 2, spec, 100)];
    let report = simulate_class_jobs(&params, &jobs);
    let rt_share = report.rt_cpu_ns as f64 / (2.0 * 4_000.0 * MS as f64);
    assert!((rt_share - 0.25).abs() < 0.01, "RT share {rt_share}");
    assert_eq!(report.scheme, "2dcs-ps");
}

#[test]
fn under_2dcs_ps_admitted_rt_jobs_meet_their_frames_beside_a_backlogged_be_job() {
    // Light RT load (2 × 2 ms per 40 ms window, 10 %) well inside the RT
    // share: proportional share serves it without a division clock.
    let spec = RtSpec::new(20 * MS, 2, 2 * MS).unwrap();
    let params = ClassSimParams {
        scheme: ClassScheme::TwoDcsPs,
        ..two_nodes(FairnessRatio { rt: 1, be: 1 }, AdmissionRule::Deterministic)
    };
    let jobs = [be(0, 0, 2, 10_000 * MS), rt(1, 0, 2, spec, 50)];
    let report = simulate_class_jobs(&params, &jobs);
    assert_eq!(report.rt_rejected, 0);
    assert_eq!(report.rt_frames_missed, 0, "{report:?}");
}
