//! One parallel job as the simulator runs it (ClusterSchedSim §2.2, Fig. 2):
//! every task (one per node) iterates compute → I/O → send to its peers →
//! receive from its peers (a barrier's root receives, then sends).

use serde::{Deserialize, Serialize};

use crate::executive::Ns;
use crate::rng::unit_from_key;

/// Who a task exchanges messages with in each iteration (ClusterSchedSim Fig. 2b).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Pattern {
    /// No communication (a batch of independent processes).
    None,
    /// Send to the next rank, receive from the previous one.
    Ring,
    /// Send to and receive from both neighbours (one peer when there are two ranks).
    #[default]
    NearestNeighbour,
    /// Every rank to every other rank.
    AllToAll,
    /// A barrier as `cosched-synth --pattern barrier` runs it: every other
    /// rank sends "arrived" to rank 0 and waits for its "release"; rank 0
    /// first receives every arrival, then releases them all.
    Barrier,
}

impl Pattern {
    /// The ranks `rank` sends to in every iteration (ascending, no duplicates).
    pub fn destinations(self, rank: u32, ranks: u32) -> Vec<u32> {
        if ranks < 2 {
            return Vec::new();
        }
        let mut out = match self {
            Pattern::None => Vec::new(),
            Pattern::Ring => vec![(rank + 1) % ranks],
            Pattern::NearestNeighbour => vec![(rank + 1) % ranks, (rank + ranks - 1) % ranks],
            Pattern::AllToAll => (0..ranks).filter(|&r| r != rank).collect(),
            Pattern::Barrier if rank == 0 => (1..ranks).collect(),
            Pattern::Barrier => vec![0],
        };
        out.sort_unstable();
        out.dedup();
        out
    }

    /// How many messages a rank receives per iteration (every pattern here is
    /// symmetric: as many as it sends).
    pub fn expected(self, rank: u32, ranks: u32) -> u32 {
        self.destinations(rank, ranks).len() as u32
    }

    /// Whether `rank` receives its messages of an iteration before it sends
    /// its own (a barrier's root), instead of after.
    pub fn receives_first(self, rank: u32) -> bool {
        self == Pattern::Barrier && rank == 0
    }
}

/// How a task waits for a message that has not arrived.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RecvMode {
    /// Busy-wait on the CPU (user-level messaging).
    #[default]
    Spin,
    /// A blocking (kernel) receive: the task sleeps until the message.
    Block,
}

/// A job of the stream.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobSpec {
    pub id: u64,
    /// Submission time.
    pub arrival: Ns,
    /// Tasks, one per node.
    pub nodes: u32,
    pub iterations: u32,
    /// Mean compute per iteration and task.
    pub compute_ns: Ns,
    /// Each task's compute in an iteration is `compute_ns × (1 ± jitter)`,
    /// uniform (0: all equal).
    pub compute_jitter: f64,
    /// Per-rank compute per iteration, overriding `compute_ns` (skew between
    /// tasks, ClusterSchedSim §2.2: "each task may follow a different
    /// distribution"); empty: every rank uses `compute_ns`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rank_compute_ns: Vec<Ns>,
    /// I/O per iteration and task (off CPU).
    pub io_ns: Ns,
    pub pattern: Pattern,
    pub message_bytes: u64,
    pub recv: RecvMode,
    /// A label for reports (`comm`, `io`, `cpu`, `swf`, ...).
    pub kind: String,
}

impl JobSpec {
    /// Compute of `rank` in `iteration`: the same number every time it is asked.
    pub fn compute_of(&self, rank: u32, iteration: u32) -> Ns {
        let base = self
            .rank_compute_ns
            .get(rank as usize)
            .copied()
            .unwrap_or(self.compute_ns);
        if self.compute_jitter <= 0.0 {
            return base;
        }
        let u = unit_from_key(&[self.id, u64::from(rank), u64::from(iteration)]);
        let factor = 1.0 + self.compute_jitter * (2.0 * u - 1.0);
        (base as f64 * factor.max(0.0)).round() as Ns
    }

    /// A job of `nodes` ranks that computes `compute_ns` per iteration and
    /// talks by `pattern`; the rest at neutral values (for tests and
    /// calibration cells).
    pub fn simple(
        id: u64,
        arrival: Ns,
        nodes: u32,
        iterations: u32,
        compute_ns: Ns,
        pattern: Pattern,
    ) -> Self {
        Self {
            id,
            arrival,
            nodes,
            iterations,
            compute_ns,
            compute_jitter: 0.0,
            rank_compute_ns: Vec::new(),
            io_ns: 0,
            pattern,
            message_bytes: 64,
            recv: RecvMode::Spin,
            kind: "test".into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_are_symmetric_and_never_send_to_self() {
        for pattern in [
            Pattern::None,
            Pattern::Ring,
            Pattern::NearestNeighbour,
            Pattern::AllToAll,
            Pattern::Barrier,
        ] {
            for ranks in 1..6 {
                let mut received = vec![0u32; ranks as usize];
                for rank in 0..ranks {
                    let dests = pattern.destinations(rank, ranks);
                    assert!(!dests.contains(&rank));
                    for d in dests {
                        received[d as usize] += 1;
                    }
                }
                for rank in 0..ranks {
                    assert_eq!(received[rank as usize], pattern.expected(rank, ranks));
                }
            }
        }
        assert_eq!(Pattern::NearestNeighbour.destinations(0, 2), vec![1]);
    }

    #[test]
    fn a_barrier_gathers_at_rank_zero_which_then_releases_the_others() {
        assert_eq!(Pattern::Barrier.destinations(0, 4), vec![1, 2, 3]);
        assert_eq!(Pattern::Barrier.destinations(2, 4), vec![0]);
        assert!(Pattern::Barrier.receives_first(0));
        assert!(!Pattern::Barrier.receives_first(2));
        assert!(!Pattern::Ring.receives_first(0));
    }
}
