//! Property tests over random submit/remove sequences, random predictions
//! and random heartbeat exchanges.

use std::collections::{BTreeMap, BTreeSet};

use proptest::prelude::*;

use super::support::{
    assert_jobs_run_only_in_own_slots_or_as_alternates, assert_matrix_consistent,
};
use crate::global::{
    ActiveRows, ColumnAllocation, GangScheduler, HeartbeatTimestamps, JobId, JobRequest,
    MatchCandidate, MatchDecision, Matrix, MatrixConfig, MatrixError, PairedGangScheduler,
    PairingConfig, QueuePolicy, UtilizationPredictor, can_pair, match_from_both_ends, row_load,
};

#[derive(Debug, Clone)]
enum Op {
    Submit {
        nodes: usize,
        exclusive: bool,
    },
    /// Removes the `pick`-th known job (placed or queued) modulo their count
    /// plus one; the extra slot removes an unknown job.
    Remove {
        pick: usize,
    },
}

fn config_strategy() -> impl Strategy<Value = MatrixConfig> {
    (
        1usize..=8,
        1usize..=4,
        prop_oneof![
            Just(ColumnAllocation::FirstFit),
            Just(ColumnAllocation::Buddy)
        ],
        prop_oneof![Just(QueuePolicy::StrictFcfs), Just(QueuePolicy::Backfill)],
        any::<bool>(),
    )
        .prop_map(
            |(nodes, max_rows, allocation, queue, repack_rows)| MatrixConfig {
                nodes,
                max_rows,
                allocation,
                queue,
                repack_rows,
            },
        )
}

fn ops_strategy() -> impl Strategy<Value = Vec<Op>> {
    let op = prop_oneof![
        3 => (1usize..=9, prop::bool::weighted(0.15))
            .prop_map(|(nodes, exclusive)| Op::Submit { nodes, exclusive }),
        2 => any::<usize>().prop_map(|pick| Op::Remove { pick }),
    ];
    prop::collection::vec(op, 0..40)
}

/// Applies one operation and checks its result against the request.
fn apply(matrix: &mut Matrix, op: &Op, next_id: &mut u64) {
    match *op {
        Op::Submit { nodes, exclusive } => {
            *next_id += 1;
            let mut request = JobRequest::new(JobId(*next_id), nodes);
            request.exclusive = exclusive;
            let before = matrix.clone();
            match matrix.submit(request) {
                Ok(_) => assert!(nodes <= matrix.nodes()),
                Err(MatrixError::JobLargerThanCluster { .. }) => {
                    assert!(nodes > matrix.nodes());
                    assert_eq!(*matrix, before);
                }
                Err(other) => panic!("unexpected {other}"),
            }
        }
        Op::Remove { pick } => {
            let known: Vec<JobId> = matrix
                .placed_jobs()
                .map(|job| job.id())
                .chain(matrix.queued_jobs().map(|job| job.id))
                .collect();
            let index = pick % (known.len() + 1);
            match known.get(index) {
                Some(&job) => {
                    matrix.remove(job).unwrap();
                }
                None => {
                    let before = matrix.clone();
                    assert_eq!(
                        matrix.remove(JobId(0)),
                        Err(MatrixError::UnknownJob(JobId(0)))
                    );
                    assert_eq!(*matrix, before);
                }
            }
        }
    }
}

fn assert_queue_respects_policy(matrix: &Matrix) {
    match matrix.config().queue {
        QueuePolicy::StrictFcfs => {
            if let Some(head) = matrix.queued_jobs().next() {
                assert!(
                    matrix.find_room(head).is_none(),
                    "the head waits but would fit"
                );
                // Ids grow with arrival: nobody who came after the head runs.
                for job in matrix.placed_jobs() {
                    assert!(
                        job.id() < head.id,
                        "{} overtook the waiting {}",
                        job.id(),
                        head.id
                    );
                }
            }
        }
        QueuePolicy::Backfill => {
            for queued in matrix.queued_jobs() {
                assert!(
                    matrix.find_room(queued).is_none(),
                    "{} waits but would fit",
                    queued.id
                );
            }
        }
    }
}

fn assert_buddy_alignment(matrix: &Matrix) {
    if matrix.config().allocation != ColumnAllocation::Buddy {
        return;
    }
    for job in matrix.placed_jobs() {
        let block = job.request.nodes.next_power_of_two();
        assert_eq!(job.columns[0] % block, 0, "{} not aligned", job.id());
        assert!(
            job.columns.windows(2).all(|w| w[1] == w[0] + 1),
            "{} not contiguous",
            job.id()
        );
    }
}

fn build(config: MatrixConfig, ops: &[Op]) -> Matrix {
    let mut matrix = Matrix::new(config).unwrap();
    let mut next_id = 0;
    for op in ops {
        apply(&mut matrix, op, &mut next_id);
    }
    matrix
}

/// Own-row appearances of each job over `slices`.
fn jobs_run_in_own_rows(matrix: &Matrix, rows: &[ActiveRows]) -> BTreeSet<JobId> {
    matrix
        .placed_jobs()
        .filter(|job| rows.iter().any(|active| active.contains(job.row)))
        .map(|job| job.id())
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn matrix_invariants_hold_after_every_operation(config in config_strategy(), ops in ops_strategy()) {
        let mut matrix = Matrix::new(config).unwrap();
        let mut next_id = 0;
        let mut scheduler = GangScheduler::new();
        for op in &ops {
            apply(&mut matrix, op, &mut next_id);
            assert_matrix_consistent(&matrix);
            assert_queue_respects_policy(&matrix);
            assert_buddy_alignment(&matrix);
            prop_assert!(matrix.non_empty_rows().len() <= matrix.rows());
            // The rotation keeps going across changes, never with an empty slice.
            match scheduler.next_slice(&matrix) {
                Some(slice) => {
                    prop_assert!(!slice.active_jobs().is_empty());
                    assert_jobs_run_only_in_own_slots_or_as_alternates(&matrix, &slice);
                }
                None => prop_assert!(matrix.has_no_placed_jobs()),
            }
        }
    }

    #[test]
    fn every_job_runs_in_its_own_slot_once_per_gang_round(config in config_strategy(), ops in ops_strategy()) {
        let matrix = build(config, &ops);
        let mut scheduler = GangScheduler::new();
        let round = matrix.non_empty_rows().len();
        let slices: Vec<_> = (0..round).map(|_| scheduler.next_slice(&matrix).unwrap()).collect();
        let rows: Vec<ActiveRows> = slices.iter().map(|slice| slice.rows).collect();
        let all: BTreeSet<JobId> = matrix.placed_jobs().map(|job| job.id()).collect();
        prop_assert_eq!(jobs_run_in_own_rows(&matrix, &rows), all);
        for slice in &slices {
            prop_assert_eq!(slice.round, 0);
            prop_assert!(!slice.active_jobs().is_empty());
            prop_assert!(slice.active_by_node.iter().all(|jobs| jobs.len() <= 1));
            assert_jobs_run_only_in_own_slots_or_as_alternates(&matrix, slice);
        }
        if round > 0 {
            prop_assert_eq!(scheduler.next_slice(&matrix).unwrap().round, 1);
        }
    }

    #[test]
    fn paired_rounds_respect_pairing_rules(
        config in config_strategy(),
        ops in ops_strategy(),
        percents in prop::collection::vec(prop::option::weighted(0.85, 0.0f64..=100.0), 40),
    ) {
        let mut matrix = build(config, &ops);
        let mut predictor = UtilizationPredictor::default();
        let ids: Vec<JobId> = matrix.placed_jobs().map(|job| job.id()).collect();
        for (job, percent) in ids.iter().zip(&percents) {
            if let Some(percent) = percent {
                predictor.observe_quantum(*job, &[*percent]).unwrap();
            }
        }
        let pairing = PairingConfig::default();
        let mut scheduler = PairedGangScheduler::new(pairing);
        let Some(first) = scheduler.next_slice(&mut matrix, &predictor) else {
            prop_assert!(matrix.has_no_placed_jobs());
            return Ok(());
        };
        assert_matrix_consistent(&matrix);
        let round_length = scheduler.current_plan().unwrap().slices.len();
        let mut slices = vec![first.slice];
        for _ in 1..round_length {
            slices.push(scheduler.next_slice(&mut matrix, &predictor).unwrap().slice);
        }
        let percent = |job: JobId| predictor.predict(job).percent;
        let exclusive = |job: JobId| matrix.placement(job).unwrap().request.exclusive;
        for slice in &slices {
            prop_assert_eq!(slice.round, 0);
            prop_assert!(!slice.active_jobs().is_empty());
            assert_jobs_run_only_in_own_slots_or_as_alternates(&matrix, slice);
            if let ActiveRows::Pair(a, b) = slice.rows {
                let (a, b) = (row_load(&matrix, &predictor, a).unwrap(), row_load(&matrix, &predictor, b).unwrap());
                prop_assert!(a.exclusive_job.is_none() && b.exclusive_job.is_none());
                prop_assert!(can_pair(a.max_percent, b.max_percent, pairing.margin_percent));
            }
            for jobs in &slice.active_by_node {
                prop_assert!(jobs.len() <= 2);
                if let [x, y] = jobs.iter().copied().collect::<Vec<_>>()[..] {
                    prop_assert!(!exclusive(x) && !exclusive(y), "exclusive job shares a node");
                    prop_assert!(can_pair(percent(x), percent(y), pairing.margin_percent));
                }
            }
        }
        let rows: Vec<ActiveRows> = slices.iter().map(|slice| slice.rows).collect();
        let all: BTreeSet<JobId> = matrix.placed_jobs().map(|job| job.id()).collect();
        prop_assert_eq!(jobs_run_in_own_rows(&matrix, &rows), all);
    }

    #[test]
    fn paired_slices_stay_valid_while_jobs_and_predictions_change(
        config in config_strategy(),
        steps in prop::collection::vec(
            (ops_strategy(), prop::collection::vec((any::<prop::sample::Index>(), 0.0f64..=100.0), 0..4)),
            1..12,
        ),
    ) {
        let mut matrix = Matrix::new(config).unwrap();
        let mut predictor = UtilizationPredictor::default();
        let pairing = PairingConfig::default();
        let mut scheduler = PairedGangScheduler::new(pairing);
        let mut next_id = 0;
        for (ops, reports) in &steps {
            for op in ops.iter().take(3) {
                apply(&mut matrix, op, &mut next_id);
            }
            let ids: Vec<JobId> = matrix.placed_jobs().map(|job| job.id()).collect();
            for (index, percent) in reports {
                if !ids.is_empty() {
                    predictor.observe_quantum(ids[index.index(ids.len())], &[*percent]).unwrap();
                }
            }
            let Some(paired) = scheduler.next_slice(&mut matrix, &predictor) else {
                prop_assert!(matrix.has_no_placed_jobs());
                continue;
            };
            assert_matrix_consistent(&matrix);
            let slice = paired.slice;
            prop_assert!(!slice.active_jobs().is_empty());
            assert_jobs_run_only_in_own_slots_or_as_alternates(&matrix, &slice);
            if let ActiveRows::Pair(a, b) = slice.rows {
                let (a, b) = (row_load(&matrix, &predictor, a).unwrap(), row_load(&matrix, &predictor, b).unwrap());
                prop_assert!(a.exclusive_job.is_none() && b.exclusive_job.is_none());
                prop_assert!(can_pair(a.max_percent, b.max_percent, pairing.margin_percent));
            }
            for jobs in &slice.active_by_node {
                prop_assert!(jobs.len() <= 2);
            }
        }
    }

    #[test]
    fn fig_4_gives_every_candidate_exactly_one_primary_decision(
        percents in prop::collection::vec(0.0f64..=100.0, 0..12),
    ) {
        let candidates: Vec<MatchCandidate<usize>> = percents
            .iter()
            .enumerate()
            .map(|(key, &percent)| MatchCandidate { key, percent })
            .collect();
        let mut primary: BTreeMap<usize, usize> = BTreeMap::new();
        for decision in match_from_both_ends(&candidates, 1.0) {
            match decision {
                MatchDecision::Pair { heavy, light, light_shared } => {
                    prop_assert!(heavy != light);
                    prop_assert!(can_pair(percents[heavy], percents[light], 1.0));
                    prop_assert!(percents[light] <= percents[heavy]);
                    *primary.entry(heavy).or_default() += 1;
                    if !light_shared {
                        *primary.entry(light).or_default() += 1;
                    }
                }
                MatchDecision::Alone(key) => *primary.entry(key).or_default() += 1,
            }
        }
        prop_assert_eq!(primary.len(), percents.len());
        prop_assert!(primary.values().all(|&count| count == 1));
    }

    #[test]
    fn offset_error_never_exceeds_half_the_round_trip(
        offset in -1_000_000_000_000i64..1_000_000_000_000,
        sent in 2_000_000_000_000u64..3_000_000_000_000,
        forward in 0u64..10_000_000,
        held in 0u64..1_000_000,
        backward in 0u64..10_000_000,
    ) {
        let agent_receive = (sent + forward).checked_add_signed(offset).unwrap();
        let exchange = HeartbeatTimestamps {
            coordinator_send_ns: sent,
            agent_receive_ns: agent_receive,
            agent_send_ns: agent_receive + held,
            coordinator_receive_ns: sent + forward + held + backward,
        };
        let sample = exchange.sample().unwrap();
        prop_assert_eq!(sample.round_trip_ns, forward + backward);
        prop_assert!(sample.offset_ns.abs_diff(offset) <= sample.round_trip_ns.div_ceil(2));
        if forward == backward {
            prop_assert_eq!(sample.offset_ns, offset);
        }
    }

    #[test]
    fn predictions_stay_within_0_and_100(
        quanta in prop::collection::vec(prop::collection::vec(0.0f64..=120.0, 1..4), 1..12),
    ) {
        let mut predictor = UtilizationPredictor::default();
        for samples in &quanta {
            let prediction = predictor.observe_quantum(JobId(1), samples).unwrap();
            prop_assert!((0.0..=100.0).contains(&prediction.percent));
        }
    }
}
