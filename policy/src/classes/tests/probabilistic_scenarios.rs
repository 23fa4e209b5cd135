//! Probabilistic admission: measured mean and variance against the RT share
//! at a target overload probability, the declared work where nothing is
//! measured. Every scenario is on one node under 2:1 (RT share 666 666 ppm)
//! with d = 1000 ns, so a work of w ns per frame is w/10 % of the CPU.

use proptest::prelude::*;

use crate::classes::{
    AdmissionRule, ClassLedger, FairnessRatio, ProbabilisticParams, Rejection, RtJob, RtLoadModel,
    WorkMoments,
};
use crate::global::JobId;

fn model() -> RtLoadModel {
    RtLoadModel::bare(FairnessRatio::new(2, 1).unwrap())
}

fn rt(id: u64, work: u64) -> RtJob {
    RtJob::new(JobId(id), 1_000, 3, vec![work]).unwrap()
}

fn rule(params: ProbabilisticParams) -> AdmissionRule {
    AdmissionRule::Probabilistic(params)
}

fn default_rule() -> AdmissionRule {
    rule(ProbabilisticParams::default())
}

fn measured(mean_ns: u64, sd_ns: u64) -> WorkMoments {
    WorkMoments {
        frames: 200,
        mean_ns,
        sd_ns,
    }
}

/// One node holding `declared.len()` admitted one-process jobs (ids 1..),
/// each measured as given (None: not measured).
fn node_with(jobs: &[(u64, Option<WorkMoments>)]) -> ClassLedger {
    let mut ledger = ClassLedger::new(1);
    for (i, &(declared, moments)) in jobs.iter().enumerate() {
        let job = rt(i as u64 + 1, declared);
        AdmissionRule::None
            .admit(&mut ledger, &job, &model())
            .unwrap();
        if let Some(moments) = moments {
            assert!(ledger.set_moments(job.id, 0, moments));
        }
    }
    ledger
}

#[test]
fn a_job_is_admitted_when_the_measured_work_leaves_room_its_declared_work_does_not() {
    // Three jobs declared 20 % each really use 12 % (± 0.5 %): 3 × 12 + 12
    // (the newcomer, charged what the others use of their declaration) =
    // 48 % plus a margin of about 2.3 %, within 66.7 %. Declared: 80 %.
    let ledger = node_with(&[(200, Some(measured(120, 5))); 3]);
    let candidate = rt(9, 200);
    assert!(matches!(
        AdmissionRule::Deterministic.evaluate(&ledger, &candidate, &model()),
        Err(Rejection::WindowCapacity { .. })
    ));
    let placement = default_rule()
        .evaluate(&ledger, &candidate, &model())
        .unwrap();
    assert_eq!(placement.nodes, vec![0]);
}

#[test]
fn a_job_is_rejected_when_the_measured_work_varies_too_much() {
    // Same means, but each frame's work swings by 15 % of the CPU: the
    // margin z·σ (about 2.33 × 30 % = 70 %) does not fit, nor does the
    // declared 80 %.
    let ledger = node_with(&[(200, Some(measured(120, 150))); 3]);
    let error = default_rule()
        .evaluate(&ledger, &rt(9, 200), &model())
        .unwrap_err();
    let Rejection::Overload(details) = error else {
        panic!("{error}");
    };
    assert_eq!(details.declared_ppm, 800_000);
    assert_eq!(details.charged_ppm, 800_000);
    // 48 %, give or take the rounding of 0.6 in floating point.
    assert!(details.mean_ppm.abs_diff(480_000) <= 1, "{details:?}");
    assert_eq!(details.capacity_ppm, 666_666);
    assert!(
        error.to_string().contains("probability over 10000 ppm"),
        "{error}"
    );
    assert_eq!(error.label(), "overload");
}

#[test]
fn a_process_not_measured_yet_is_charged_its_declared_work() {
    // The same three jobs before they have run min_frames frames: nothing
    // is measured, so 3 × 20 % + 20 % = 80 % > 66.7 %.
    let early = WorkMoments {
        frames: 99,
        ..measured(120, 5)
    };
    let ledger = node_with(&[(200, Some(early)); 3]);
    assert!(matches!(
        default_rule().evaluate(&ledger, &rt(9, 200), &model()),
        Err(Rejection::Overload(_))
    ));
}

#[test]
fn a_newcomer_is_charged_its_declared_work_until_enough_processes_were_measured() {
    // Three measured at 12 % of a declared 20 % (ratio 0.6). A newcomer
    // declaring 40 % counts for 24 %: 36 + 24 = 60 % plus a margin of ~3 %
    // fits. With a population of four required it counts for its 40 %.
    let ledger = node_with(&[(200, Some(measured(120, 5))); 3]);
    let candidate = rt(9, 400);
    assert!(
        default_rule()
            .evaluate(&ledger, &candidate, &model())
            .is_ok()
    );
    let strict = rule(ProbabilisticParams {
        min_population: 4,
        ..ProbabilisticParams::default()
    });
    let error = strict.evaluate(&ledger, &candidate, &model()).unwrap_err();
    let Rejection::Overload(details) = error else {
        panic!("{error}");
    };
    assert_eq!(details.mean_ppm, 760_000);
}

#[test]
fn when_every_declared_worst_case_fits_the_job_is_admitted_whatever_the_variance() {
    // Three jobs declared 10 % that swing wildly (σ = 8 %), and a newcomer
    // declared 36.6 %: 66.6 % of worst cases fits 66.7 %, so no overload is
    // possible, whatever the estimate says (here far more).
    let ledger = node_with(&[(100, Some(measured(90, 80))); 3]);
    assert!(
        default_rule()
            .evaluate(&ledger, &rt(9, 366), &model())
            .is_ok()
    );
    // One more nanosecond per frame and the estimate decides: refused.
    assert!(matches!(
        default_rule().evaluate(&ledger, &rt(9, 367), &model()),
        Err(Rejection::Overload(_))
    ));
}

#[test]
fn a_program_that_uses_more_than_it_declared_is_charged_what_it_uses() {
    // Declared 20 %, measured 35 % (σ 0): a newcomer of 32 % fits with the
    // declared 20 % (52 %), not with the 35 % that really runs (67 %).
    let ledger = node_with(&[(200, Some(measured(350, 0)))]);
    let error = default_rule()
        .evaluate(&ledger, &rt(9, 320), &model())
        .unwrap_err();
    let Rejection::Overload(details) = error else {
        panic!("{error}");
    };
    assert_eq!(details.declared_ppm, 670_000);
    assert!(details.charged_ppm > details.capacity_ppm, "{details:?}");
}

#[test]
fn a_stricter_overload_target_admits_less() {
    // Three jobs at 12 % ± 4 % of a declared 20 %, a newcomer of 28 %
    // (charged 16.8 % ± 5.6 %): 52.8 % + z·σ with σ ≈ 8.9 %: fits at z(10 %) =
    // 1.28, not at z(0.1 %) = 3.09.
    let ledger = node_with(&[(200, Some(measured(120, 40))); 3]);
    let candidate = rt(9, 280);
    let at = |overload_ppm| {
        rule(ProbabilisticParams {
            overload_ppm,
            ..ProbabilisticParams::default()
        })
        .evaluate(&ledger, &candidate, &model())
        .is_ok()
    };
    assert!(at(100_000));
    assert!(!at(1_000));
}

#[test]
fn a_job_that_leaves_takes_its_measurements_with_it() {
    let mut ledger = node_with(&[(200, Some(measured(120, 5))); 3]);
    assert!(ledger.remove(JobId(2)));
    assert_eq!(ledger.moments(JobId(2), 0), None);
    assert!(!ledger.set_moments(JobId(2), 0, measured(1, 1)));
    // Two measured processes left: below the population of three, the
    // newcomer counts for its declared 45 % (24 + 45 > 66.7); with the
    // third it counted for 27 %.
    assert!(matches!(
        default_rule().evaluate(&ledger, &rt(9, 450), &model()),
        Err(Rejection::Overload(_))
    ));
    let before = node_with(&[(200, Some(measured(120, 5))); 3]);
    assert!(
        default_rule()
            .evaluate(&before, &rt(9, 450), &model())
            .is_ok()
    );
}

/// A node's admitted jobs: (declared %, measured mean %, σ %, frames).
fn admitted() -> impl Strategy<Value = Vec<(u64, u64, u64, u64)>> {
    prop::collection::vec((1u64..=40, 1u64..=50, 0u64..=20, 0u64..300), 0..6)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn the_rule_admits_whatever_fits_by_declared_work_and_never_past_its_estimate(
        jobs in admitted(),
        candidate in 1u64..=60,
        overload_ppm in 100u32..=400_000,
        min_population in 1usize..4,
    ) {
        let mut ledger = ClassLedger::new(1);
        for (i, &(declared, mean, sd, frames)) in jobs.iter().enumerate() {
            let job = rt(i as u64 + 1, declared * 10);
            AdmissionRule::None.admit(&mut ledger, &job, &model()).unwrap();
            ledger.set_moments(job.id, 0, WorkMoments { frames, mean_ns: mean * 10, sd_ns: sd * 10 });
        }
        let params = ProbabilisticParams { overload_ppm, min_frames: 100, min_population };
        let job = rt(99, candidate * 10);
        let before = ledger.clone();
        let admitted = rule(params).admit(&mut ledger, &job, &model()).is_ok();
        if !admitted {
            prop_assert_eq!(&ledger, &before);
        }
        // Worst cases: the declared work, or the measured mean where it is
        // more (and measured over enough frames).
        let worst: u64 = jobs
            .iter()
            .map(|&(d, m, _, f)| if f >= 100 { d.max(m) } else { d })
            .sum::<u64>() + candidate;
        if worst * 10_000 <= 666_666 {
            prop_assert!(admitted, "worst cases {worst} % fit");
        }
        if admitted {
            let population = params.population(&ledger);
            let load = params.node_estimate(&ledger, ledger.node(0), population.as_ref(), &model());
            prop_assert!(params.fits(&load, &model()), "{load:?}");
        }
        // A laxer target admits at least as much.
        let lax = ProbabilisticParams { overload_ppm: overload_ppm.saturating_mul(2), ..params };
        if admitted {
            prop_assert!(rule(lax).evaluate(&before, &job, &model()).is_ok());
        }
    }
}
