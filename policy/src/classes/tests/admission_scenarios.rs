//! Admission of RT jobs: the paper's rule at its bound, and statistical
//! admission from measured work.

use crate::classes::{
    AdmissionRule, ClassLedger, DivisionCost, FairnessRatio, MeasuredWork, Rejection, RtJob,
    RtJobError, RtLoadModel, RtPlacement, RtSpecError, StatisticalParams, WorkSamples,
};
use crate::global::JobId;

fn model() -> RtLoadModel {
    RtLoadModel::bare(FairnessRatio::new(2, 1).unwrap())
}

/// d = 1500, b = 4: Γ = 6000, RT capacity 4000 per window under 2:1; a
/// process of work τ loads 4τ.
fn job(id: u64, works: &[u64]) -> RtJob {
    RtJob::new(JobId(id), 1_500, 4, works.to_vec()).unwrap()
}

/// One node with one process of work 500 (load 2000) already admitted.
fn half_full() -> ClassLedger {
    let mut ledger = ClassLedger::new(1);
    AdmissionRule::Deterministic
        .admit(&mut ledger, &job(1, &[500]), &model())
        .unwrap();
    ledger
}

#[test]
fn an_rt_job_admitted_at_exactly_the_bound() {
    let mut ledger = half_full();
    let placement = AdmissionRule::Deterministic
        .admit(&mut ledger, &job(2, &[500]), &model())
        .unwrap();
    assert_eq!(placement.nodes, vec![0]);
    assert_eq!(ledger.node(0).sigma_ns(&model()), 4_000);
}

#[test]
fn an_rt_job_one_nanosecond_past_the_bound_is_rejected() {
    let mut ledger = half_full();
    let before = ledger.clone();
    assert_eq!(
        AdmissionRule::Deterministic.admit(&mut ledger, &job(2, &[501]), &model()),
        Err(Rejection::WindowCapacity {
            job: JobId(2),
            process: 0,
            node: 0,
            load_ns: 2_004,
            placed_ns: 2_000,
            capacity_ns: 4_000,
        })
    );
    assert_eq!(ledger, before);
}

#[test]
fn the_overheads_the_paper_counts_push_a_job_at_the_bound_out() {
    for costly in [
        RtLoadModel {
            unblock_ns: 1,
            ..model()
        },
        RtLoadModel {
            context_switch_ns: 1,
            ..model()
        },
        RtLoadModel {
            division: Some(DivisionCost {
                period_ns: 3_000,
                switch_ns: 1,
            }),
            ..model()
        },
    ] {
        let mut ledger = ClassLedger::new(1);
        AdmissionRule::Deterministic
            .admit(&mut ledger, &job(1, &[400]), &costly)
            .unwrap();
        // Without overheads 1600 + 2400 is exactly the capacity.
        let result = AdmissionRule::Deterministic.evaluate(&ledger, &job(2, &[600]), &costly);
        assert!(
            matches!(result, Err(Rejection::WindowCapacity { .. })),
            "{costly:?}: {result:?}"
        );
        assert!(
            AdmissionRule::Deterministic
                .evaluate(&ledger, &job(2, &[600]), &model())
                .is_ok()
        );
    }
}

#[test]
fn the_shorter_window_of_the_node_and_the_newcomer_bounds_the_test() {
    let ledger = half_full();
    // d = 500, b = 4: Γ_A = 2000, capacity 1333 over min(6000, 2000).
    let short = RtJob::new(JobId(2), 500, 4, vec![1]).unwrap();
    assert!(matches!(
        AdmissionRule::Deterministic.evaluate(&ledger, &short, &model()),
        Err(Rejection::WindowCapacity {
            capacity_ns: 1_333,
            ..
        })
    ));
    // The other way round: a node holding the short job (load 400) refuses
    // a long job of load 1200 that its own window of 6000 would take.
    let mut ledger = ClassLedger::new(1);
    let short = RtJob::new(JobId(1), 500, 4, vec![100]).unwrap();
    AdmissionRule::Deterministic
        .admit(&mut ledger, &short, &model())
        .unwrap();
    assert!(matches!(
        AdmissionRule::Deterministic.evaluate(&ledger, &job(2, &[300]), &model()),
        Err(Rejection::WindowCapacity {
            load_ns: 1_200,
            placed_ns: 400,
            capacity_ns: 1_333,
            ..
        })
    ));
}

#[test]
fn a_job_one_of_whose_processes_fails_on_the_node_with_the_most_laxity_is_rejected_whole() {
    let mut ledger = ClassLedger::new(2);
    // 1000 fits each node (load 4000); the third process finds no room.
    let greedy = job(1, &[1_000, 1_000, 1]);
    let before = ledger.clone();
    assert!(matches!(
        AdmissionRule::Deterministic.admit(&mut ledger, &greedy, &model()),
        Err(Rejection::WindowCapacity { process: 2, .. })
    ));
    assert_eq!(ledger, before);
}

#[test]
fn without_admission_control_every_job_is_placed_by_laxity() {
    let mut ledger = half_full();
    let placement = AdmissionRule::None
        .admit(&mut ledger, &job(2, &[1_500, 1_500]), &model())
        .unwrap();
    assert_eq!(placement.nodes, vec![0, 0]);
    assert_eq!(ledger.node(0).sigma_ns(&model()), 14_000);
}

#[test]
fn a_job_already_placed_or_invalid_is_refused() {
    let ledger = half_full();
    for rule in [AdmissionRule::None, AdmissionRule::Deterministic] {
        assert_eq!(
            rule.evaluate(&ledger, &job(1, &[1]), &model()),
            Err(Rejection::AlreadyPlaced(JobId(1)))
        );
        let invalid = RtJob {
            id: JobId(9),
            period_ns: 10,
            frames: 1,
            process_work_ns: vec![11],
        };
        assert_eq!(
            rule.evaluate(&ledger, &invalid, &model()),
            Err(Rejection::Invalid(RtJobError::Process {
                process: 0,
                source: RtSpecError::WorkExceedsPeriod {
                    work_ns: 11,
                    period_ns: 10
                }
            }))
        );
    }
}

/// d = 1000, b = 3: a process of work τ uses τ/1000 of a CPU.
fn frame_job(id: u64, work: u64) -> RtJob {
    RtJob::new(JobId(id), 1_000, 3, vec![work]).unwrap()
}

/// One node with a process declared at 600 per frame (60 %), placed.
fn declared_heavy() -> ClassLedger {
    let mut ledger = ClassLedger::new(1);
    AdmissionRule::None
        .admit(&mut ledger, &frame_job(1, 600), &model())
        .unwrap();
    ledger
}

fn statistical(bound_ppm: u64) -> AdmissionRule {
    AdmissionRule::Statistical(StatisticalParams {
        bound_ppm,
        min_frames: 100,
    })
}

#[test]
fn measured_work_admits_a_job_the_declared_worst_case_rejects() {
    let mut ledger = declared_heavy();
    // Its frames really take 250, but for two outliers in 200 frames.
    let mut samples = WorkSamples::new(200);
    for frame in 0..200 {
        samples.record(if frame % 100 == 7 { 1_000 } else { 250 });
    }
    let measured = samples.measured(990_000).unwrap();
    assert_eq!(
        measured,
        MeasuredWork {
            frames: 200,
            work_ns: 250
        }
    );
    assert!(ledger.set_job_measured(JobId(1), measured));
    let candidate = frame_job(2, 300);
    assert!(matches!(
        AdmissionRule::Deterministic.evaluate(&ledger, &candidate, &model()),
        Err(Rejection::WindowCapacity { .. })
    ));
    let placement = statistical(1_000_000)
        .admit(&mut ledger, &candidate, &model())
        .unwrap();
    assert_eq!(
        placement,
        RtPlacement {
            job: JobId(2),
            nodes: vec![0]
        }
    );
}

#[test]
fn too_few_measured_frames_fall_back_to_the_declared_work() {
    let mut ledger = declared_heavy();
    ledger.set_job_measured(
        JobId(1),
        MeasuredWork {
            frames: 99,
            work_ns: 100,
        },
    );
    assert_eq!(
        statistical(1_000_000).evaluate(&ledger, &frame_job(2, 300), &model()),
        Err(Rejection::Utilization {
            job: JobId(2),
            process: 0,
            node: 0,
            load_ppm: 300_000,
            placed_ppm: 600_000,
            capacity_ppm: 666_666,
        })
    );
}

#[test]
fn the_statistical_bound_admits_at_exactly_the_bound_and_rejects_just_past_it() {
    let mut ledger = declared_heavy();
    ledger.set_job_measured(
        JobId(1),
        MeasuredWork {
            frames: 100,
            work_ns: 300,
        },
    );
    // 900 000 ppm · 2/3 = 600 000 ppm for RT: 300 000 measured + 300 000.
    // Job 1 uses half its declaration, so a newcomer is charged half its
    // own: 602 declared counts for 301.
    let rule = statistical(900_000);
    assert!(matches!(
        rule.evaluate(&ledger, &frame_job(2, 602), &model()),
        Err(Rejection::Utilization {
            load_ppm: 301_000,
            placed_ppm: 300_000,
            capacity_ppm: 600_000,
            ..
        })
    ));
    assert!(
        rule.admit(&mut ledger, &frame_job(2, 600), &model())
            .is_ok()
    );
}

#[test]
fn measurements_of_a_job_that_leaves_are_forgotten() {
    let mut ledger = declared_heavy();
    let measured = MeasuredWork {
        frames: 500,
        work_ns: 10,
    };
    assert!(ledger.set_measured(JobId(1), 0, measured));
    assert!(!ledger.set_measured(JobId(1), 1, measured));
    assert!(!ledger.set_job_measured(JobId(7), measured));
    assert!(ledger.remove(JobId(1)));
    assert_eq!(ledger.measured(JobId(1), 0), None);
    assert!(!ledger.remove(JobId(1)));
}

#[test]
fn statistical_admission_spreads_processes_to_the_least_utilized_node() {
    let mut ledger = ClassLedger::new(2);
    AdmissionRule::None
        .admit(&mut ledger, &frame_job(1, 100), &model())
        .unwrap();
    let two = RtJob::new(JobId(2), 1_000, 3, vec![200, 300]).unwrap();
    let placement = statistical(1_000_000)
        .admit(&mut ledger, &two, &model())
        .unwrap();
    // 300 first, to the empty node 1; then 200 to node 0 (100 < 300).
    assert_eq!(placement.nodes, vec![0, 1]);
}

#[test]
fn with_one_process_per_node_each_rule_tests_a_process_on_the_best_node_the_job_does_not_use() {
    // Two nodes: node 0 half full (load 2000 of 4000), node 1 empty. A job
    // of two processes of 600 (load 2400 each): the first takes node 1 (most
    // laxity), the second may only go to node 0, where 2000 + 2400 > 4000.
    let mut ledger = ClassLedger::one_process_per_node(2);
    AdmissionRule::Deterministic
        .admit(&mut ledger, &job(1, &[500]), &model())
        .unwrap();
    let error = AdmissionRule::Deterministic
        .evaluate(&ledger, &job(2, &[600, 600]), &model())
        .unwrap_err();
    assert!(
        matches!(
            error,
            Rejection::WindowCapacity {
                node: 0,
                process: 1,
                ..
            }
        ),
        "{error}"
    );
    assert_eq!(error.label(), "window_capacity");
    // The statistical rule spreads the same way.
    let placement = statistical(1_000_000)
        .evaluate(&ledger, &job(3, &[100, 100]), &model())
        .unwrap();
    assert!(placement.is_spread(), "{placement:?}");
}

/// One node with a process declared at `declared` per frame, measured over
/// 200 frames at `measured`.
fn one_measured(declared: u64, measured: u64) -> ClassLedger {
    let mut ledger = ClassLedger::new(1);
    AdmissionRule::None
        .admit(&mut ledger, &frame_job(1, declared), &model())
        .unwrap();
    assert!(ledger.set_job_measured(
        JobId(1),
        MeasuredWork {
            frames: 200,
            work_ns: measured,
        },
    ));
    ledger
}

#[test]
fn a_newcomer_is_charged_what_admitted_programs_were_measured_to_use_of_their_declaration() {
    // Job 1 declared 400 (40 %) and uses 300: calibration 3/4. A newcomer
    // declaring 400 counts for 300: 30 % + 30 % fits the 2:1 RT share
    // (66.7 %); at its declared 40 % it would not.
    let ledger = one_measured(400, 300);
    let params = StatisticalParams {
        bound_ppm: 1_000_000,
        min_frames: 100,
    };
    assert_eq!(params.calibration(&ledger).scale(400), 300);
    assert!(
        statistical(1_000_000)
            .evaluate(&ledger, &frame_job(2, 400), &model())
            .is_ok()
    );
    // Had job 1 used all it declared, the newcomer is charged its 400.
    let exact = one_measured(400, 400);
    assert!(matches!(
        statistical(1_000_000).evaluate(&exact, &frame_job(2, 400), &model()),
        Err(Rejection::Utilization { .. })
    ));
}

#[test]
fn programs_that_use_more_than_they_declare_never_raise_a_newcomers_charge() {
    // Job 1 declared 300 and uses 350: the calibration is capped at 1.
    let ledger = one_measured(300, 350);
    let params = StatisticalParams {
        bound_ppm: 1_000_000,
        min_frames: 100,
    };
    assert_eq!(params.calibration(&ledger).scale(300), 300);
    // 35 % measured + 30 % declared = 65 % fits 66.7 %.
    assert!(
        statistical(1_000_000)
            .evaluate(&ledger, &frame_job(2, 300), &model())
            .is_ok()
    );
}
