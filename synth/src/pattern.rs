//! Communication patterns as per-rank plans: what one rank does in every
//! iteration, in order.
//!
//! Kept pure so the same plan drives the real runtime and the simulated
//! message-passing tests that check the stop agreement.

use serde::{Deserialize, Serialize};

use crate::header::Kind;

/// Which ranks talk to which in each iteration.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Pattern {
    /// Send to the next rank, receive from the previous one.
    Ring,
    /// Periodic 1-D nearest neighbour: exchange with both neighbours.
    Neighbour,
    /// Exchange with every other rank.
    AllToAll,
    /// Everyone reports to rank 0, which releases everyone.
    Barrier,
    /// Rank 0 hands out tasks and collects replies; it does not compute.
    MasterWorker,
    /// A real-time pipeline (`--rt`, which selects it): rank 0 releases a
    /// frame every period, every rank works on it and hands it to the next
    /// rank, and reports it done.
    #[value(skip)]
    Pipeline,
}

impl Pattern {
    pub const ALL: [Pattern; 6] = [
        Pattern::Ring,
        Pattern::Neighbour,
        Pattern::AllToAll,
        Pattern::Barrier,
        Pattern::MasterWorker,
        Pattern::Pipeline,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Pattern::Ring => "ring",
            Pattern::Neighbour => "neighbour",
            Pattern::AllToAll => "all-to-all",
            Pattern::Barrier => "barrier",
            Pattern::MasterWorker => "master-worker",
            Pattern::Pipeline => "pipeline",
        }
    }
}

/// One thing a rank does within an iteration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    /// Burn `--compute-us` of CPU time.
    Compute,
    /// Sleep `--io-us` (only on iterations selected by `--io-every`).
    Io,
    /// Send one `kind` frame to each listed rank.
    Send { kind: Kind, to: Vec<usize> },
    /// Wait until one `kind` frame of this iteration arrived from each listed rank.
    Receive { kind: Kind, from: Vec<usize> },
    /// Pipeline rank 0: wait until this iteration's frame is released, a
    /// period after the previous one.
    Release,
    /// Pipeline: this iteration's frame is done; report it (cosched-rt).
    FrameDone,
}

/// The ordered steps of one iteration for one rank.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    steps: Vec<Step>,
}

impl Plan {
    pub fn steps(&self) -> &[Step] {
        &self.steps
    }

    /// Frames this rank sends per iteration.
    pub fn sends_per_iteration(&self) -> usize {
        self.steps
            .iter()
            .map(|step| match step {
                Step::Send { to, .. } => to.len(),
                _ => 0,
            })
            .sum()
    }

    /// Frames this rank receives per iteration.
    pub fn receives_per_iteration(&self) -> usize {
        self.steps
            .iter()
            .map(|step| match step {
                Step::Receive { from, .. } => from.len(),
                _ => 0,
            })
            .sum()
    }

    /// Whether some step of this plan waits for a `kind` frame from `src`;
    /// anything else arriving is a protocol violation to count, not buffer.
    pub fn expects(&self, kind: Kind, src: usize) -> bool {
        self.steps.iter().any(|step| match step {
            Step::Receive { kind: k, from } => *k == kind && from.contains(&src),
            _ => false,
        })
    }
}

/// The plan of `rank` among `size` ranks.
///
/// Peers are deduplicated (a 2-rank neighbour pattern has one neighbour) and
/// a single rank never communicates; it only computes and does I/O, even in
/// master-worker, where it is its own worker (and in a pipeline, where it
/// is the only stage).
pub fn plan(pattern: Pattern, rank: usize, size: usize) -> Plan {
    assert!(rank < size, "rank {rank} out of range for size {size}");
    let work = [Step::Compute, Step::Io];
    if size == 1 && pattern != Pattern::Pipeline {
        return Plan {
            steps: work.to_vec(),
        };
    }
    let others: Vec<usize> = (0..size).filter(|&r| r != rank).collect();
    let mut steps = Vec::with_capacity(4);
    match pattern {
        Pattern::Ring => {
            steps.extend(work);
            steps.push(Step::Send {
                kind: Kind::Data,
                to: vec![(rank + 1) % size],
            });
            steps.push(Step::Receive {
                kind: Kind::Data,
                from: vec![(rank + size - 1) % size],
            });
        }
        Pattern::Neighbour => {
            let neighbours = neighbours(rank, size);
            steps.extend(work);
            steps.push(Step::Send {
                kind: Kind::Data,
                to: neighbours.clone(),
            });
            steps.push(Step::Receive {
                kind: Kind::Data,
                from: neighbours,
            });
        }
        Pattern::AllToAll => {
            steps.extend(work);
            steps.push(Step::Send {
                kind: Kind::Data,
                to: others.clone(),
            });
            steps.push(Step::Receive {
                kind: Kind::Data,
                from: others,
            });
        }
        Pattern::Barrier if rank == 0 => {
            steps.extend(work);
            steps.push(Step::Receive {
                kind: Kind::Arrive,
                from: others.clone(),
            });
            steps.push(Step::Send {
                kind: Kind::Release,
                to: others,
            });
        }
        Pattern::Barrier => {
            steps.extend(work);
            steps.push(Step::Send {
                kind: Kind::Arrive,
                to: vec![0],
            });
            steps.push(Step::Receive {
                kind: Kind::Release,
                from: vec![0],
            });
        }
        Pattern::MasterWorker if rank == 0 => {
            steps.push(Step::Send {
                kind: Kind::Task,
                to: others.clone(),
            });
            steps.push(Step::Receive {
                kind: Kind::Reply,
                from: others,
            });
        }
        Pattern::MasterWorker => {
            steps.push(Step::Receive {
                kind: Kind::Task,
                from: vec![0],
            });
            steps.extend(work);
            steps.push(Step::Send {
                kind: Kind::Reply,
                to: vec![0],
            });
        }
        Pattern::Pipeline => return pipeline(rank, size),
    }
    Plan { steps }
}

/// One stage of the pipeline 0 → 1 → … → size−1: its frame comes from the
/// release (rank 0) or the previous stage, goes to the next stage (but for
/// the last), and is done once handed on.
fn pipeline(rank: usize, size: usize) -> Plan {
    let mut steps = Vec::with_capacity(5);
    steps.push(if rank == 0 {
        Step::Release
    } else {
        Step::Receive {
            kind: Kind::Data,
            from: vec![rank - 1],
        }
    });
    steps.extend([Step::Compute, Step::Io]);
    if rank + 1 < size {
        steps.push(Step::Send {
            kind: Kind::Data,
            to: vec![rank + 1],
        });
    }
    steps.push(Step::FrameDone);
    Plan { steps }
}

/// Left and right neighbours on a periodic line, without self or repeats.
fn neighbours(rank: usize, size: usize) -> Vec<usize> {
    let mut peers = vec![(rank + size - 1) % size, (rank + 1) % size];
    peers.sort_unstable();
    peers.dedup();
    peers.retain(|&peer| peer != rank);
    peers
}

#[cfg(test)]
mod tests {
    use super::*;

    /// (sender, receiver, kind) of one frame of an iteration.
    type Edge = (usize, usize, Kind);

    /// Every edge of one iteration, as senders and as receivers see it.
    fn edges(pattern: Pattern, size: usize) -> (Vec<Edge>, Vec<Edge>) {
        let mut sent = Vec::new();
        let mut expected = Vec::new();
        for rank in 0..size {
            for step in plan(pattern, rank, size).steps() {
                match step {
                    Step::Send { kind, to } => sent.extend(to.iter().map(|&d| (rank, d, *kind))),
                    Step::Receive { kind, from } => {
                        expected.extend(from.iter().map(|&s| (s, rank, *kind)))
                    }
                    Step::Compute | Step::Io | Step::Release | Step::FrameDone => {}
                }
            }
        }
        sent.sort();
        expected.sort();
        (sent, expected)
    }

    fn sends(pattern: Pattern, rank: usize, size: usize) -> Vec<(Kind, Vec<usize>)> {
        plan(pattern, rank, size)
            .steps()
            .iter()
            .filter_map(|step| match step {
                Step::Send { kind, to } => Some((*kind, to.clone())),
                _ => None,
            })
            .collect()
    }

    fn receives(pattern: Pattern, rank: usize, size: usize) -> Vec<(Kind, Vec<usize>)> {
        plan(pattern, rank, size)
            .steps()
            .iter()
            .filter_map(|step| match step {
                Step::Receive { kind, from } => Some((*kind, from.clone())),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn every_send_matches_exactly_one_expected_receive() {
        for pattern in Pattern::ALL {
            for size in 1..=6 {
                let (sent, expected) = edges(pattern, size);
                assert_eq!(sent, expected, "{pattern:?} with {size} ranks");
                assert!(
                    sent.iter().all(|(s, d, _)| s != d && *d < size),
                    "{pattern:?} {size}: self or out-of-range send"
                );
                let mut unique = sent.clone();
                unique.dedup();
                assert_eq!(unique, sent, "{pattern:?} {size}: duplicate edge");
            }
        }
    }

    #[test]
    fn single_rank_only_works() {
        for pattern in Pattern::ALL.into_iter().filter(|&p| p != Pattern::Pipeline) {
            assert_eq!(
                plan(pattern, 0, 1).steps(),
                &[Step::Compute, Step::Io],
                "{pattern:?}"
            );
        }
    }

    #[test]
    fn ring_sends_forward_and_receives_from_behind() {
        for size in 2..=6 {
            for rank in 0..size {
                assert_eq!(
                    sends(Pattern::Ring, rank, size),
                    vec![(Kind::Data, vec![(rank + 1) % size])]
                );
                assert_eq!(
                    receives(Pattern::Ring, rank, size),
                    vec![(Kind::Data, vec![(rank + size - 1) % size])]
                );
            }
        }
    }

    #[test]
    fn neighbour_dedupes_small_rings() {
        assert_eq!(
            receives(Pattern::Neighbour, 0, 2),
            vec![(Kind::Data, vec![1])]
        );
        assert_eq!(sends(Pattern::Neighbour, 1, 2), vec![(Kind::Data, vec![0])]);
        assert_eq!(
            sends(Pattern::Neighbour, 0, 3),
            vec![(Kind::Data, vec![1, 2])]
        );
        assert_eq!(
            receives(Pattern::Neighbour, 2, 5),
            vec![(Kind::Data, vec![1, 3])]
        );
        assert_eq!(
            receives(Pattern::Neighbour, 0, 6),
            vec![(Kind::Data, vec![1, 5])]
        );
    }

    #[test]
    fn all_to_all_talks_to_every_other_rank() {
        for size in 2..=6 {
            for rank in 0..size {
                let others: Vec<usize> = (0..size).filter(|&r| r != rank).collect();
                assert_eq!(
                    sends(Pattern::AllToAll, rank, size),
                    vec![(Kind::Data, others.clone())]
                );
                assert_eq!(
                    receives(Pattern::AllToAll, rank, size),
                    vec![(Kind::Data, others)]
                );
            }
        }
    }

    #[test]
    fn barrier_gathers_at_rank_zero_then_releases() {
        let root = plan(Pattern::Barrier, 0, 4);
        assert_eq!(
            &root.steps()[2..],
            &[
                Step::Receive {
                    kind: Kind::Arrive,
                    from: vec![1, 2, 3]
                },
                Step::Send {
                    kind: Kind::Release,
                    to: vec![1, 2, 3]
                },
            ]
        );
        let member = plan(Pattern::Barrier, 2, 4);
        assert_eq!(
            &member.steps()[2..],
            &[
                Step::Send {
                    kind: Kind::Arrive,
                    to: vec![0]
                },
                Step::Receive {
                    kind: Kind::Release,
                    from: vec![0]
                },
            ]
        );
    }

    #[test]
    fn master_does_not_compute_and_workers_compute_between_task_and_reply() {
        let master = plan(Pattern::MasterWorker, 0, 3);
        assert!(!master.steps().contains(&Step::Compute));
        assert_eq!(master.sends_per_iteration(), 2);
        assert_eq!(master.receives_per_iteration(), 2);
        let worker = plan(Pattern::MasterWorker, 1, 3);
        assert_eq!(
            worker.steps(),
            &[
                Step::Receive {
                    kind: Kind::Task,
                    from: vec![0]
                },
                Step::Compute,
                Step::Io,
                Step::Send {
                    kind: Kind::Reply,
                    to: vec![0]
                },
            ]
        );
    }

    #[test]
    fn a_pipeline_hands_each_frame_down_and_reports_it_at_every_stage() {
        let work = [Step::Compute, Step::Io];
        assert_eq!(
            plan(Pattern::Pipeline, 0, 1).steps(),
            &[
                Step::Release,
                work[0].clone(),
                work[1].clone(),
                Step::FrameDone
            ]
        );
        let data = |ranks: Vec<usize>| (Kind::Data, ranks);
        for size in 2..=5 {
            assert_eq!(sends(Pattern::Pipeline, 0, size), vec![data(vec![1])]);
            assert!(receives(Pattern::Pipeline, 0, size).is_empty());
            assert_eq!(plan(Pattern::Pipeline, 0, size).steps()[0], Step::Release);
            for rank in 1..size - 1 {
                assert_eq!(
                    sends(Pattern::Pipeline, rank, size),
                    vec![data(vec![rank + 1])]
                );
                assert_eq!(
                    receives(Pattern::Pipeline, rank, size),
                    vec![data(vec![rank - 1])]
                );
            }
            let last = size - 1;
            assert!(sends(Pattern::Pipeline, last, size).is_empty());
            assert_eq!(
                receives(Pattern::Pipeline, last, size),
                vec![data(vec![last - 1])]
            );
            for rank in 0..size {
                let steps = plan(Pattern::Pipeline, rank, size);
                assert_eq!(
                    steps.steps().last(),
                    Some(&Step::FrameDone),
                    "done once handed on"
                );
                assert_eq!(
                    steps
                        .steps()
                        .iter()
                        .filter(|s| **s == Step::Compute)
                        .count(),
                    1
                );
            }
        }
    }

    #[test]
    fn expects_only_planned_kind_and_source() {
        let member = plan(Pattern::Barrier, 1, 3);
        assert!(member.expects(Kind::Release, 0));
        assert!(!member.expects(Kind::Arrive, 0));
        assert!(!member.expects(Kind::Release, 2));
        let ring = plan(Pattern::Ring, 1, 4);
        assert!(ring.expects(Kind::Data, 0));
        assert!(!ring.expects(Kind::Data, 2));
    }
}
