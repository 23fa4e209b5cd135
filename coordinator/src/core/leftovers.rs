//! Ranks the coordinator gives up are killed on their node, also when the
//! node could not be told at the time.
//!
//! A rank is given up when its job is cancelled, when its job failed while
//! the rank's node was unreachable, or when a restarted agent no longer
//! knows it. If it was launched, its processes may still run there,
//! unmanaged. Such a rank is recorded on its node (persisted) and sent as
//! `ReapRanks` at once when the node is ready, else after its next inventory,
//! and again after every later inventory until the agent acknowledges it
//! with `RanksReaped`. An agent of protocol 1.0 gets `CancelJob` instead,
//! which kills only the jobs it still knows, and the record is dropped.

use std::collections::BTreeSet;

use cosched_policy::global::NodeIndex;
use cosched_proto::wire::{CancelJob, MessageKind, RankRef, RanksReaped, ReapRanks};

use super::{Core, RankState};

/// Reap orders kept per node at most. A node that never comes back would
/// otherwise hold one record for every rank given up there, for ever (and
/// in the persisted state); past the cap the oldest job's orders go first,
/// with a warning: that node's processes, if it returns, are the agent's
/// own leftovers check's to find.
pub const MAX_UNREAPED_PER_NODE: usize = 4096;

/// Drops the oldest orders (lowest job ids: ids only grow) beyond `cap`;
/// returns them.
fn keep_newest(unreaped: &mut BTreeSet<RankRef>, cap: usize) -> Vec<RankRef> {
    let mut dropped = Vec::new();
    while unreaped.len() > cap {
        dropped.extend(unreaped.pop_first());
    }
    dropped
}

impl Core {
    /// Marks rank `index` of job `id` lost for `reason`; if it may have
    /// processes on its node, that node is told to kill them.
    pub(super) fn give_up_rank(&mut self, id: u32, index: usize, reason: &str) {
        let Some(rank) = self
            .jobs
            .get_mut(&id)
            .and_then(|job| job.ranks.get_mut(index))
        else {
            return;
        };
        let may_run = rank.state.may_run();
        rank.state = RankState::Lost {
            reason: reason.to_string(),
        };
        if !may_run {
            return;
        }
        let node = rank.node;
        let leftover = RankRef {
            job_id: id,
            rank: index as u32,
        };
        let unreaped = &mut self.nodes[node].record.unreaped;
        unreaped.insert(leftover);
        for oldest in keep_newest(unreaped, MAX_UNREAPED_PER_NODE) {
            tracing::warn!(
                node,
                job = oldest.job_id,
                rank = oldest.rank,
                "too many reap orders kept for an absent node: dropping the oldest"
            );
        }
        self.persist();
        self.send_reaps(node, vec![leftover]);
    }

    /// Sends the reap orders for `ranks` (recorded on `node`) if the node is
    /// ready; otherwise its next inventory does.
    pub(super) fn send_reaps(&mut self, node: NodeIndex, ranks: Vec<RankRef>) {
        if ranks.is_empty() || !self.nodes[node].is_ready() {
            return;
        }
        if self.nodes[node].knows(MessageKind::ReapRanks) {
            self.send(node, ReapRanks { ranks });
            return;
        }
        let jobs: BTreeSet<u32> = ranks.iter().map(|rank| rank.job_id).collect();
        for job_id in jobs {
            self.send(node, CancelJob { job_id });
        }
        let unreaped = &mut self.nodes[node].record.unreaped;
        for rank in &ranks {
            unreaped.remove(rank);
        }
        self.persist();
    }

    /// Every rank still to be reaped on `node`, sent again (after its
    /// inventory: the agent may have restarted since the last order).
    pub(super) fn resend_reaps(&mut self, node: NodeIndex) {
        let ranks = self.nodes[node].record.unreaped.iter().copied().collect();
        self.send_reaps(node, ranks);
    }

    /// The agent of `node` carried out reap orders: they are done.
    pub fn ranks_reaped(&mut self, node: NodeIndex, reaped: &RanksReaped) {
        let name = self.node_name(node);
        let mut changed = false;
        for rank in &reaped.ranks {
            if self.nodes[node].record.unreaped.remove(&rank.rank_ref()) {
                changed = true;
                tracing::info!(
                    node = %name,
                    job = rank.job_id,
                    rank = rank.rank,
                    processes = rank.processes,
                    "given-up rank reaped"
                );
            }
        }
        if changed {
            self.persist();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rank(job_id: u32) -> RankRef {
        RankRef { job_id, rank: 0 }
    }

    #[test]
    fn orders_of_a_node_that_never_returns_stay_bounded_dropping_the_oldest_jobs() {
        let mut unreaped: BTreeSet<RankRef> = [7, 3, 9, 5].map(rank).into();
        assert_eq!(keep_newest(&mut unreaped, 2), vec![rank(3), rank(5)]);
        assert_eq!(unreaped, [7, 9].map(rank).into());
        assert!(keep_newest(&mut unreaped, 2).is_empty(), "at the cap: kept");
    }
}
