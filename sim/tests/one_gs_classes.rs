//! 1GS over a job stream (issue 15 item 1), through the coordinator's
//! `OneLevelGang` and `OneLevelGangRotor`, and the measured admission rules
//! of 2DCS on the simulator's CLI parameters.

use cosched_policy::classes::{AdmissionRule, FairnessRatio, RtSpec, StatisticalParams};
use cosched_sim::classes::{ClassScheme, ClassSimParams, simulate_class_jobs, simulate_classes};

mod support;

use support::{MS, be, rt};

/// 1GS with M = 4 rows of 10 ms (Ψ = 40 ms, the window of d = 20 ms,
/// b = 2).
fn one_gs(nodes: usize, ratio: FairnessRatio, admission: AdmissionRule) -> ClassSimParams {
    ClassSimParams {
        scheme: ClassScheme::OneLevelGang,
        nodes,
        ratio,
        admission,
        one_gs_rows: 4,
        one_gs_slot_ns: 10 * MS,
        ..ClassSimParams::default()
    }
}

/// The seed 002 §5 stream: 9 RT jobs in 10, up to 4 processes on 16 nodes,
/// arriving faster than the RT rows can hold them.
fn busy_stream(seed: u64, admission: AdmissionRule) -> ClassSimParams {
    ClassSimParams {
        jobs: 300,
        rt_share: 0.9,
        arrival_rate_per_s: 16.0,
        seed,
        ..one_gs(16, FairnessRatio { rt: 1, be: 1 }, admission)
    }
}

#[test]
fn under_1gs_with_deterministic_admission_no_admitted_rt_job_misses_a_frame_over_a_seeded_stream() {
    for seed in 1..=3 {
        let report = simulate_classes(&busy_stream(seed, AdmissionRule::Deterministic));
        assert_eq!(report.scheme, "1gs");
        assert!(report.rt_frames_expected > 10_000, "{report:?}");
        assert!(report.rt_rejected > 0, "the stream overloads the RT rows");
        assert_eq!(report.rt_frames_missed, 0, "seed {seed}: {report:?}");
        assert!(report.be_jobs > 0);
    }
}

#[test]
fn under_1gs_without_admission_the_same_stream_misses_frames() {
    // One row per RT job whatever its τ: a job of τ > 5 ms gets 10 ms per
    // 40 ms window for 2τ of frames.
    let report = simulate_classes(&busy_stream(1, AdmissionRule::None));
    assert!(report.rt_frames_missed > 0, "{report:?}");
}

#[test]
fn under_1gs_both_classes_backlogged_get_their_x_to_y_shares() {
    // 3:1 of M = 4 rows: three RT rows, one BE row. Three RT jobs that
    // always want the CPU (τ = d) fill the RT rows, one BE job that never
    // ends within the RT jobs' 4 s fills the BE row: no cell is empty, so
    // nothing is replicated, and each class gets its rows' share.
    let spec = RtSpec::new(20 * MS, 2, 20 * MS).unwrap();
    let params = one_gs(2, FairnessRatio { rt: 3, be: 1 }, AdmissionRule::None);
    let jobs = [
        rt(0, 0, 2, spec, 100),
        rt(1, 0, 2, spec, 100),
        rt(2, 0, 2, spec, 100),
        be(3, 0, 2, 100_000 * MS),
    ];
    let report = simulate_class_jobs(&params, &jobs);
    let rt_share = report.rt_cpu_ns as f64 / (2.0 * 4_000.0 * MS as f64);
    assert!((rt_share - 0.75).abs() < 0.01, "RT share {rt_share}");
    assert_eq!(report.rt_lent_ns, 0);
    // While the RT jobs ran the BE job got its one row of four (1 s of its
    // 100 s), then every slot (the empty RT rows replicate it): it ends
    // at 4 + 99 s.
    assert!(
        (report.be_mean_response_s - 103.0).abs() < 1e-6,
        "{report:?}"
    );
}

#[test]
fn under_1gs_an_rt_job_that_finds_no_rows_waits_w_and_is_evicted() {
    // One node, RT rows 0 and 1 of 4; two RT jobs of τ = 8 ms need r = 2
    // rows each under admission, so the second waits for the first's rows
    // and is evicted after w = 200 ms, long before the first leaves.
    let spec = RtSpec::new(20 * MS, 2, 8 * MS).unwrap();
    let params = ClassSimParams {
        rt_max_wait_ns: 200 * MS,
        ..one_gs(
            1,
            FairnessRatio { rt: 1, be: 1 },
            AdmissionRule::Deterministic,
        )
    };
    let jobs = [rt(0, 0, 1, spec, 25), rt(1, 5 * MS, 1, spec, 25)];
    let report = simulate_class_jobs(&params, &jobs);
    assert_eq!((report.rt_jobs, report.rt_rejected), (2, 1));
    assert_eq!(report.rt_frames_expected, 2 * 25);
    assert_eq!(report.rt_frames_missed, 0, "{report:?}");
}

#[test]
fn under_1gs_an_idle_rt_row_is_replicated_to_a_lone_be_job() {
    // BE alone: replication (step 4) fills the empty RT rows with it, so it
    // runs in every slot, and RT rows' time counts as lent.
    let params = one_gs(
        2,
        FairnessRatio { rt: 1, be: 1 },
        AdmissionRule::Deterministic,
    );
    let report = simulate_class_jobs(&params, &[be(0, 0, 2, 100 * MS)]);
    assert_eq!(report.be_cpu_ns, 2 * 100 * MS);
    assert!(report.be_lent_ns > 0, "{report:?}");
    assert!(report.be_mean_response_s < 0.11, "{report:?}");
}

#[test]
fn the_statistical_rule_admits_on_measured_work_more_than_the_deterministic_one() {
    // RT jobs that use a quarter to all of their declared τ: the statistical
    // rule charges what the ledger was told they use, so it turns fewer
    // away than the declared-work rule on the same stream.
    let stream = |admission| ClassSimParams {
        scheme: ClassScheme::TwoDcsTdm,
        nodes: 16,
        jobs: 300,
        rt_share: 0.9,
        arrival_rate_per_s: 16.0,
        rt_use_min: 0.25,
        admission,
        ..ClassSimParams::default()
    };
    let deterministic = simulate_classes(&stream(AdmissionRule::Deterministic));
    let statistical = simulate_classes(&stream(AdmissionRule::Statistical(StatisticalParams {
        bound_ppm: 1_000_000,
        min_frames: 4,
    })));
    assert_eq!(statistical.admission, "statistical");
    assert!(
        statistical.rt_rejected < deterministic.rt_rejected,
        "statistical {} vs deterministic {}",
        statistical.rt_rejected,
        deterministic.rt_rejected
    );
}
