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
        self.nodes[node].record.unreaped.insert(leftover);
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
