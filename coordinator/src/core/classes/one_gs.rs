//! 1GS's clock-driven part: RT jobs that waited longer than w for their
//! rows are evicted (§3.2: rejected), on the coordinator's tick or at the
//! next arrival or departure, whichever comes first; and the RT jobs agents
//! report at n ≥ b in their current window are left out of replication
//! (§4.1 step 1), from the next event on; a new RT job warms up in its
//! start row until its agents report its processes ready for their first
//! frame (`JobFrames.ready`, protocol 1.6).

use std::collections::BTreeSet;

use cosched_policy::{classes::one_level_gang::Evicted, global::JobId};
use cosched_proto::wire::READY_SINCE_MINOR;

use super::{Admission, ClassState};
use crate::{
    admin::protocol::JobStateView,
    core::{Core, Observed},
};

impl Core {
    /// When the next RT wait runs out (for the daemon's timer).
    pub fn next_eviction_ns(&self) -> Option<u64> {
        self.classes.one_gs()?.next_expiry()
    }

    /// Evicts the RT jobs whose wait ran out by `now_ns`.
    pub fn evict_expired(&mut self, now_ns: u64) {
        self.advance(now_ns);
        let ClassState::OneGs(gang) = &mut self.classes else {
            return;
        };
        let expired = gang.evict_expired(now_ns);
        let knock = super::placement::Knock {
            started: expired
                .started
                .into_iter()
                .map(|JobId(id)| id as u32)
                .collect(),
            evicted: expired.evicted,
        };
        self.settle_knock(knock);
    }

    /// A waiting RT job is out: it ends, rejected, with the wait it had.
    pub(in crate::core) fn evict(&mut self, evicted: &Evicted) {
        let id = evicted.job.id.0 as u32;
        let rows = self
            .classes
            .one_gs()
            .map_or(1, |gang| evicted.job.rows_to_hold(gang.config()));
        let Some(job) = self.jobs.get_mut(&id) else {
            tracing::error!(job = id, "an evicted 1GS job has no record");
            return;
        };
        let reason = format!(
            "evicted: waited {} ms for {rows} rows of 1GS's real-time set (classes.rt_max_wait_ms {})",
            evicted.waited_ns / 1_000_000,
            self.config.classes.rt_max_wait_ms
        );
        tracing::info!(job = id, %reason, "real-time job evicted");
        job.state = JobStateView::Failed;
        job.reason = Some(reason.clone());
        job.admission = Some(Admission::Rejected { reason });
        self.observe(Observed::RtEvicted);
        self.retire(id);
    }

    /// Tells 1GS which RT jobs produce their b frames now: those whose every
    /// live rank's agent says so in its latest frame report.
    pub(in crate::core) fn refresh_satisfied(&mut self) {
        let ClassState::OneGs(gang) = &self.classes else {
            return;
        };
        let satisfied: BTreeSet<JobId> = gang
            .allocations()
            .map(|held| held.job.id)
            .filter(|&JobId(id)| {
                let id = id as u32;
                self.jobs
                    .get(&id)
                    .is_some_and(|job| self.frames.satisfied(id, &job.live_nodes()))
            })
            .collect();
        if let ClassState::OneGs(gang) = &mut self.classes {
            gang.set_satisfied(satisfied);
        }
    }

    /// Tells the 1GS rotor which new RT jobs are past their start-up: those
    /// whose every live rank's agent reported its processes ready. A node
    /// whose agent predates readiness (protocol < 1.6) never says so and
    /// counts as ready, so its jobs do not warm up.
    pub(in crate::core) fn refresh_ready(&mut self) {
        let ClassState::OneGs(gang) = &self.classes else {
            return;
        };
        let ready: Vec<JobId> = gang
            .allocations()
            .filter(|held| held.job.rt_spec().is_some())
            .map(|held| held.job.id)
            .filter(|&JobId(id)| {
                let id = id as u32;
                self.jobs.get(&id).is_some_and(|job| {
                    self.frames.ready(id, &job.live_nodes(), |node| {
                        self.nodes
                            .get(node)
                            .is_some_and(|n| n.protocol.minor < READY_SINCE_MINOR)
                    })
                })
            })
            .collect();
        for job in ready {
            self.rotation.counters_ready(job);
        }
    }
}
