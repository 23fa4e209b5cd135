//! Paired gang: prediction (equation 1, sharp changes), matching (Fig. 4),
//! slot homogeneity, alternates, and the round-by-round scheduler.

use std::collections::BTreeSet;

use super::support::{assert_jobs_run_only_in_own_slots_or_as_alternates, job, layout, measured};
use crate::global::{
    ActiveRows, AlternateRun, JobId, JobRequest, MatchCandidate, MatchDecision, Matrix,
    MatrixSnapshot, PairedGangScheduler, PairingConfig, PlacedJob, PredictionBasis,
    PredictorConfig, PredictorError, QuantumTiming, SharpChangeDirection, SliceReason,
    UtilizationPredictor, equation_1, homogenize_rows, match_from_both_ends, paired_alternates,
    plan_paired_round,
};

fn candidates(percents: &[(usize, f64)]) -> Vec<MatchCandidate<usize>> {
    percents
        .iter()
        .map(|&(key, percent)| MatchCandidate { key, percent })
        .collect()
}

/// One single-node job per row, job id = row + 1, all on node 0.
fn one_job_per_row(rows: usize) -> Matrix {
    let placements: Vec<(u64, usize, &[usize])> = (0..rows)
        .map(|row| (row as u64 + 1, row, &[0usize][..]))
        .collect();
    layout(1, rows, &placements)
}

fn approx(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-9
}

#[test]
fn predictor_follows_equation_1() {
    let mut predictor = UtilizationPredictor::default();
    let job = JobId(1);
    // Each job quantum reports one value per process; the mean is used.
    for per_process in [
        [5.0, 15.0],
        [20.0, 20.0],
        [25.0, 35.0],
        [40.0, 40.0],
        [45.0, 55.0],
    ] {
        predictor.observe_quantum(job, &per_process).unwrap();
    }
    // Quantum means, newest first: 50, 40, 30, 20 (10 is now too old).
    let prediction = predictor.predict(job);
    assert!(approx(
        prediction.percent,
        0.4 * 50.0 + 0.3 * 40.0 + 0.2 * 30.0 + 0.1 * 20.0
    ));
    assert_eq!(prediction.basis, PredictionBasis::History { quanta: 4 });
    assert!(approx(equation_1(&[50.0, 40.0, 30.0, 20.0, 99.0]), 40.0));
}

#[test]
fn short_history_renormalises_the_weights() {
    assert!(approx(equation_1(&[30.0]), 30.0));
    assert!(approx(
        equation_1(&[50.0, 40.0]),
        (0.4 * 50.0 + 0.3 * 40.0) / 0.7
    ));
    assert!(approx(equation_1(&[]), 100.0));
}

#[test]
fn new_job_is_predicted_full_and_runs_alone() {
    let predictor = measured(&[(2, 5.0)]);
    let fresh = predictor.predict(JobId(1));
    assert_eq!(
        (fresh.percent, fresh.basis),
        (100.0, PredictionBasis::NewJob)
    );
    let matrix = one_job_per_row(2);
    let plan = plan_paired_round(&matrix, &predictor, &PairingConfig::default(), 0);
    assert_eq!(plan.slices.len(), 2);
    assert_eq!(plan.slices[0].rows, ActiveRows::Single(0));
    assert_eq!(
        plan.slices[0].reason,
        SliceReason::AloneMeasuring {
            row: 0,
            job: JobId(1)
        }
    );
    // After its first quantum, measured alone at 30 %, it pairs.
    let mut predictor = predictor;
    predictor.observe_quantum(JobId(1), &[30.0]).unwrap();
    let plan = plan_paired_round(&matrix, &predictor, &PairingConfig::default(), 1);
    assert_eq!(plan.slices.len(), 1);
    assert_eq!(plan.slices[0].rows, ActiveRows::Pair(0, 1));
}

#[test]
fn sharp_change_resets_prediction_to_full() {
    let mut predictor = measured(&[(1, 10.0)]);
    predictor.observe_quantum(JobId(1), &[12.0]).unwrap();
    // A rise of exactly 20 points is not sharp ("more than 20").
    assert_eq!(
        predictor.observe_quantum(JobId(1), &[32.0]).unwrap().basis,
        PredictionBasis::History { quanta: 3 }
    );
    let jumped = predictor.observe_quantum(JobId(1), &[55.0]).unwrap();
    assert_eq!(jumped.percent, 100.0);
    assert_eq!(
        jumped.basis,
        PredictionBasis::SharpChange {
            previous_percent: 32.0,
            measured_percent: 55.0
        }
    );
    assert!(jumped.is_speculative());
    // The next quantum, run alone, is the new truth; old history is gone.
    let calibrated = predictor.observe_quantum(JobId(1), &[90.0]).unwrap();
    assert_eq!(
        (calibrated.percent, calibrated.basis),
        (90.0, PredictionBasis::History { quanta: 1 })
    );
}

/// A report of `quantum` learnt while slices up to `first_unplanned - 1`
/// are already planned.
fn timed(quantum: u64, first_unplanned: u64) -> QuantumTiming {
    QuantumTiming {
        quantum,
        first_unplanned,
    }
}

#[test]
fn spinning_jobs_are_not_paired_on_a_calibration_from_a_slice_they_still_shared() {
    // Two MPI jobs sleep until their common start (measured ~1 %), so
    // they are paired; then both spin. Reports arrive one slice late: the
    // report of quantum 10 (shared, each ~47 %) is learnt while slice 11,
    // planned on the old predictions, already runs them together again.
    let matrix = one_job_per_row(2);
    let config = PairingConfig::default();
    let mut predictor = UtilizationPredictor::default();
    for (quantum, percent) in [(7, 1.0), (8, 1.2), (9, 0.9)] {
        for job in [JobId(1), JobId(2)] {
            predictor
                .observe_timed_quantum(job, timed(quantum, quantum + 2), &[percent])
                .unwrap();
        }
    }
    let plan = plan_paired_round(&matrix, &predictor, &config, 0);
    assert_eq!(plan.slices[0].rows, ActiveRows::Pair(1, 0));
    for job in [JobId(1), JobId(2)] {
        let jumped = predictor
            .observe_timed_quantum(job, timed(10, 12), &[47.0])
            .unwrap();
        assert!(jumped.is_speculative(), "1 % -> 47 % is sharp");
        // Quantum 11 was shared too: it is no calibration.
        let still = predictor
            .observe_timed_quantum(job, timed(11, 13), &[47.5])
            .unwrap();
        assert_eq!(still.percent, 100.0, "{job} calibrated on a shared slice");
    }
    let plan = plan_paired_round(&matrix, &predictor, &config, 1);
    assert_eq!(plan.slices.len(), 2, "speculative jobs run alone");
    // Quantum 12 on, planned after the change: alone, each ~95 %.
    for job in [JobId(1), JobId(2)] {
        let calibrated = predictor
            .observe_timed_quantum(job, timed(12, 14), &[95.0])
            .unwrap();
        assert_eq!(
            (calibrated.percent, calibrated.basis),
            (95.0, PredictionBasis::History { quanta: 1 })
        );
    }
    let plan = plan_paired_round(&matrix, &predictor, &config, 2);
    assert_eq!(
        plan.slices
            .iter()
            .map(|slice| slice.rows)
            .collect::<Vec<_>>(),
        [ActiveRows::Single(0), ActiveRows::Single(1)],
        "two CPU-bound jobs must not share a slice"
    );
}

#[test]
fn a_restarted_coordinator_calibrates_on_its_first_report() {
    // Slice numbers start again at 0 after a restart: a calibration
    // waiting for quantum 500 of the old numbering takes the next report.
    let mut predictor = measured(&[(1, 10.0)]);
    predictor
        .observe_timed_quantum(JobId(1), timed(498, 500), &[60.0])
        .unwrap();
    predictor.forget_quantum_numbers();
    let calibrated = predictor
        .observe_timed_quantum(JobId(1), timed(3, 5), &[88.0])
        .unwrap();
    assert_eq!(
        (calibrated.percent, calibrated.basis),
        (88.0, PredictionBasis::History { quanta: 1 })
    );
}

#[test]
fn sharp_drop_counts_unless_only_increases_are_watched() {
    let mut both = measured(&[(1, 90.0)]);
    assert!(
        both.observe_quantum(JobId(1), &[40.0])
            .unwrap()
            .is_speculative()
    );
    let mut rises_only = UtilizationPredictor::new(PredictorConfig {
        sharp_change_direction: SharpChangeDirection::Increase,
        ..PredictorConfig::default()
    });
    rises_only.observe_quantum(JobId(1), &[90.0]).unwrap();
    assert!(
        !rises_only
            .observe_quantum(JobId(1), &[40.0])
            .unwrap()
            .is_speculative()
    );
    assert!(
        rises_only
            .observe_quantum(JobId(1), &[70.0])
            .unwrap()
            .is_speculative()
    );
}

#[test]
fn bad_utilisation_reports_are_refused() {
    let mut predictor = UtilizationPredictor::default();
    assert_eq!(
        predictor.observe_quantum(JobId(1), &[]),
        Err(PredictorError::NoSamples(JobId(1)))
    );
    assert!(matches!(
        predictor.observe_quantum(JobId(1), &[10.0, f64::NAN]),
        Err(PredictorError::InvalidSample { .. })
    ));
    assert!(matches!(
        predictor.observe_quantum(JobId(1), &[-1.0]),
        Err(PredictorError::InvalidSample { .. })
    ));
    assert_eq!(
        predictor.predict(JobId(1)).basis,
        PredictionBasis::NewJob,
        "nothing recorded"
    );
    assert_eq!(
        predictor
            .observe_quantum(JobId(1), &[130.0])
            .unwrap()
            .percent,
        100.0
    );
    predictor.forget(JobId(1));
    assert_eq!(predictor.predict(JobId(1)).basis, PredictionBasis::NewJob);
}

#[test]
fn matching_pairs_heavy_with_light_jobs() {
    let decisions = match_from_both_ends(
        &candidates(&[(0, 90.0), (1, 80.0), (2, 5.0), (3, 10.0)]),
        1.0,
    );
    assert_eq!(
        decisions,
        vec![
            MatchDecision::Pair {
                heavy: 0,
                light: 2,
                light_shared: false
            },
            MatchDecision::Pair {
                heavy: 1,
                light: 3,
                light_shared: false
            },
        ]
    );
}

#[test]
fn pair_over_margin_is_not_made() {
    // 60 + 39 + 1 = 100 is not < 100.
    let decisions = match_from_both_ends(&candidates(&[(0, 60.0), (1, 39.0)]), 1.0);
    assert_eq!(
        decisions,
        vec![MatchDecision::Alone(0), MatchDecision::Alone(1)]
    );
    let decisions = match_from_both_ends(&candidates(&[(0, 60.0), (1, 38.9)]), 1.0);
    assert_eq!(
        decisions,
        vec![MatchDecision::Pair {
            heavy: 0,
            light: 1,
            light_shared: false
        }]
    );
}

#[test]
fn light_job_is_shared_by_heavy_jobs_that_find_no_unmatched_partner() {
    // Paired Gang Scheduling §4.1.2: one I/O-bound job among three compute-bound ones is
    // matched with all of them.
    let decisions = match_from_both_ends(
        &candidates(&[(0, 92.0), (1, 90.0), (2, 3.0), (3, 91.0)]),
        1.0,
    );
    assert_eq!(
        decisions,
        vec![
            MatchDecision::Pair {
                heavy: 0,
                light: 2,
                light_shared: false
            },
            MatchDecision::Pair {
                heavy: 3,
                light: 2,
                light_shared: true
            },
            MatchDecision::Pair {
                heavy: 1,
                light: 2,
                light_shared: true
            },
        ]
    );
}

#[test]
fn middle_candidate_left_by_fig_4_still_gets_a_decision() {
    let decisions = match_from_both_ends(&candidates(&[(0, 10.0), (1, 20.0), (2, 30.0)]), 1.0);
    assert_eq!(
        decisions,
        vec![
            MatchDecision::Pair {
                heavy: 2,
                light: 0,
                light_shared: false
            },
            MatchDecision::Pair {
                heavy: 1,
                light: 0,
                light_shared: true
            },
        ]
    );
    let decisions = match_from_both_ends(&candidates(&[(7, 42.0)]), 1.0);
    assert_eq!(decisions, vec![MatchDecision::Alone(7)]);
    assert!(match_from_both_ends::<usize>(&[], 1.0).is_empty());
}

#[test]
fn rows_are_matched_by_their_heaviest_job() {
    // Row 0: jobs at 10 % and 70 % (max 70). Row 1: a job at 35 %.
    let matrix = layout(2, 2, &[(1, 0, &[0]), (2, 0, &[1]), (3, 1, &[0, 1])]);
    let predictor = measured(&[(1, 10.0), (2, 70.0), (3, 35.0)]);
    let plan = plan_paired_round(&matrix, &predictor, &PairingConfig::default(), 0);
    assert_eq!(plan.slices.len(), 2, "70 + 35 + 1 >= 100: no pair");
    let predictor = measured(&[(1, 10.0), (2, 60.0), (3, 35.0)]);
    let plan = plan_paired_round(&matrix, &predictor, &PairingConfig::default(), 0);
    assert_eq!(plan.slices.len(), 1);
    assert_eq!(plan.slices[0].rows, ActiveRows::Pair(0, 1));
    let text = plan.explain_job(&matrix, JobId(3)).unwrap();
    assert_eq!(
        text,
        "row 0 (60.0%) paired with row 1 (35.0%): 60.0 + 35.0 + 1.0 < 100"
    );
}

#[test]
fn exclusive_job_is_never_paired() {
    let mut snapshot = MatrixSnapshot::from(one_job_per_row(2));
    snapshot.placed[1].request = JobRequest::new(JobId(2), 1).exclusive();
    let matrix = Matrix::try_from(snapshot).unwrap();
    let predictor = measured(&[(1, 90.0), (2, 2.0)]);
    let plan = plan_paired_round(&matrix, &predictor, &PairingConfig::default(), 0);
    assert_eq!(plan.slices.len(), 2);
    assert!(
        plan.slices
            .iter()
            .all(|slice| matches!(slice.rows, ActiveRows::Single(_)))
    );
    assert_eq!(
        plan.slices[1].reason,
        SliceReason::AloneExclusive {
            row: 1,
            job: JobId(2)
        }
    );
    assert!(
        plan.explain_job(&matrix, JobId(2))
            .unwrap()
            .contains("exclusive")
    );
    // Nor does it run as an alternate next to another job.
    for rows in [ActiveRows::Single(0), ActiveRows::Pair(0, 1)] {
        let alternates = paired_alternates(&matrix, &predictor, &PairingConfig::default(), rows);
        assert!(alternates.is_empty());
    }
}

#[test]
fn heterogeneous_row_is_split_before_matching() {
    // Row 0 holds a 10 % job and a 50 % job on different nodes; row 1 a 45 %
    // job. Max(row 0) = 50 blocks pairing with row 1.
    let mut matrix = layout(2, 3, &[(1, 0, &[0]), (2, 0, &[1]), (3, 1, &[0, 1])]);
    let predictor = measured(&[(1, 10.0), (2, 50.0), (3, 45.0)]);
    let moves = homogenize_rows(&mut matrix, &predictor, 20.0);
    assert_eq!(moves.len(), 1);
    assert_eq!(
        (moves[0].job, moves[0].from_row, moves[0].to_row),
        (JobId(2), 0, 2)
    );
    let plan = plan_paired_round(&matrix, &predictor, &PairingConfig::default(), 0);
    // Rows: 0 → 10 %, 1 → 45 %, 2 → 50 %: the 10 % row pairs with the 50 %
    // one, the 45 % row shares it (10 + 45 + 1 < 100).
    assert!(
        plan.slices
            .iter()
            .any(|slice| slice.rows == ActiveRows::Pair(2, 0))
    );
    assert!(
        plan.slices
            .iter()
            .any(|slice| slice.rows == ActiveRows::Pair(1, 0))
    );
}

#[test]
fn homogeneity_ignores_jobs_not_yet_measured() {
    let mut matrix = layout(2, 3, &[(1, 0, &[0]), (2, 0, &[1])]);
    let predictor = measured(&[(1, 10.0)]); // job 2 is new: 100 % on speculation
    assert!(homogenize_rows(&mut matrix, &predictor, 20.0).is_empty());
}

#[test]
fn paired_alternates_keep_the_band_and_the_pairing_condition() {
    // Row 0: job 1 (80 %) on nodes 0-1. Row 1: job 2 (10 %) on node 0.
    // Row 2: job 3 (15 %) on node 1; job 4 (60 %) on node 2.
    let matrix = layout(
        3,
        3,
        &[(1, 0, &[0, 1]), (2, 1, &[0]), (3, 2, &[1]), (4, 2, &[2])],
    );
    let predictor = measured(&[(1, 80.0), (2, 10.0), (3, 15.0), (4, 60.0)]);
    let config = PairingConfig::default();
    let alternates = paired_alternates(&matrix, &predictor, &config, ActiveRows::Pair(0, 1));
    // Job 3 (15 %) fits row 1's side on node 1 (idle there), next to job 1:
    // 15 + 80 + 1 < 100, and within 20 of row 1's 10 %. Job 4 (60 %) is too
    // far from either side's band.
    assert_eq!(
        alternates,
        vec![AlternateRun {
            job: JobId(3),
            in_row: 1
        }]
    );
}

#[test]
fn paired_scheduler_runs_every_row_each_round_and_explains_it() {
    let matrix_rows = one_job_per_row(4);
    let mut matrix = matrix_rows.clone();
    let predictor = measured(&[(1, 85.0), (2, 8.0), (3, 50.0), (4, 45.0)]);
    let mut scheduler = PairedGangScheduler::new(PairingConfig::default());
    let first = scheduler.next_slice(&mut matrix, &predictor).unwrap();
    let plan = scheduler.current_plan().unwrap().clone();
    assert_eq!(plan.slices.len(), 2);
    let mut seen = BTreeSet::new();
    seen.extend(first.slice.active_jobs());
    let second = scheduler.next_slice(&mut matrix, &predictor).unwrap();
    seen.extend(second.slice.active_jobs());
    assert_eq!(seen, (1..=4).map(JobId).collect());
    assert_eq!((first.slice.round, second.slice.round), (0, 0));
    for slice in [&first.slice, &second.slice] {
        assert_jobs_run_only_in_own_slots_or_as_alternates(&matrix, slice);
        assert!(matches!(slice.rows, ActiveRows::Pair(_, _)));
    }
    assert!(first.reason.to_string().contains("paired with"));
    assert_eq!(
        scheduler
            .next_slice(&mut matrix, &predictor)
            .unwrap()
            .slice
            .round,
        1
    );
}

#[test]
fn planned_pair_splits_when_a_partner_turns_heavy_mid_round() {
    let mut matrix = one_job_per_row(4);
    let mut predictor = measured(&[(1, 85.0), (2, 8.0), (3, 50.0), (4, 45.0)]);
    let mut scheduler = PairedGangScheduler::new(PairingConfig::default());
    let first = scheduler.next_slice(&mut matrix, &predictor).unwrap();
    assert_eq!(first.slice.rows, ActiveRows::Pair(0, 1));
    // Job 4 (row 3) jumps sharply while rows 2 and 3 wait for their turn.
    predictor.observe_quantum(JobId(4), &[80.0]).unwrap();
    let second = scheduler.next_slice(&mut matrix, &predictor).unwrap();
    let third = scheduler.next_slice(&mut matrix, &predictor).unwrap();
    assert_eq!(second.slice.rows, ActiveRows::Single(2));
    assert_eq!(third.slice.rows, ActiveRows::Single(3));
    assert_eq!(
        second.reason,
        SliceReason::AloneAfterSplit { row: 2, partner: 3 }
    );
    assert_eq!(third.slice.round, 0, "the split stays in the same round");
}

#[test]
fn layout_helper_keeps_exactly_the_given_cells() {
    // Guards the helper used above: a layout keeps exactly the given cells.
    let matrix = layout(3, 2, &[(1, 1, &[0, 2])]);
    assert_eq!(
        matrix.placement(JobId(1)),
        Some(&PlacedJob {
            request: job(1, 2),
            row: 1,
            columns: vec![0, 2]
        })
    );
}
