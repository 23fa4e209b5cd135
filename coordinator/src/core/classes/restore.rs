//! The BE/RT policies' state after a coordinator restart: 1GS's matrix and
//! queues come from the state file (checked on load); the 2DCS ledger is
//! rebuilt from the job records, which say where every rank runs.

use cosched_policy::{
    classes::{ClassLedger, OneLevelGang, RtPlacement},
    global::{JobId, NodeIndex},
};

use super::{ClassState, Divided, rt_job, rt_spec};
use crate::{admin::protocol::JobStateView, core::Core};

impl Core {
    /// Takes over the persisted state of the saved BE/RT policy.
    pub(in crate::core) fn restore_classes(
        &mut self,
        one_gs: Option<OneLevelGang>,
    ) -> Result<(), String> {
        match &mut self.classes {
            ClassState::Matrix => Ok(()),
            ClassState::OneGs(gang) => {
                *gang = one_gs.ok_or("state file: one-level-gang without its matrix (one_gs)")?;
                Ok(())
            }
            ClassState::Divided(divided) => {
                let mut ledger = ClassLedger::one_process_per_node(self.nodes.len());
                for job in self.jobs.values() {
                    if job.state != JobStateView::Running {
                        continue;
                    }
                    let nodes: Vec<NodeIndex> = job.ranks.iter().map(|rank| rank.node).collect();
                    if nodes.iter().any(|&node| node >= self.nodes.len()) {
                        return Err(format!("state file: job {} runs past the nodes", job.id));
                    }
                    let id = JobId(u64::from(job.id));
                    match rt_spec(&job.submission.class) {
                        Some(spec) => {
                            let placement = RtPlacement { job: id, nodes };
                            if !placement.is_spread() {
                                return Err(format!(
                                    "state file: job {} has two ranks on one node",
                                    job.id
                                ));
                            }
                            ledger.place_rt(&rt_job(job.id, job.ranks.len(), spec), placement);
                        }
                        None => ledger.place_be(id, nodes),
                    }
                }
                *divided = Divided {
                    ledger,
                    clock: None,
                };
                Ok(())
            }
        }
    }

    /// Every active job is where the BE/RT policy's state says, and back.
    pub(in crate::core) fn check_classes_consistency(&self) -> Result<(), String> {
        if self.matrix.placed_jobs().count() + self.matrix.queued_jobs().count() != 0 {
            return Err(format!(
                "state file: the Ousterhout matrix holds jobs under {}",
                self.policy
            ));
        }
        let mismatch = |id: u32, state: JobStateView| {
            Err(format!(
                "state file: job {id} ({}) does not match {}'s state",
                state.as_str(),
                self.policy
            ))
        };
        match &self.classes {
            ClassState::Matrix => Ok(()),
            ClassState::OneGs(gang) => {
                for job in self.jobs.values() {
                    let id = JobId(u64::from(job.id));
                    let matches = match job.state {
                        JobStateView::Queued => gang.queue_position(id).is_some(),
                        JobStateView::Running => gang.allocation(id).is_some_and(|held| {
                            let mut nodes: Vec<NodeIndex> =
                                job.ranks.iter().map(|rank| rank.node).collect();
                            nodes.sort_unstable();
                            held.columns == nodes
                        }),
                        _ => false,
                    };
                    if !matches {
                        return mismatch(job.id, job.state);
                    }
                }
                let held = gang.allocations().count()
                    + gang
                        .waiting(cosched_policy::classes::Class::RealTime)
                        .count()
                    + gang
                        .waiting(cosched_policy::classes::Class::BestEffort)
                        .count();
                if held != self.jobs.len() {
                    return Err(format!(
                        "state file: 1GS holds {held} jobs but {} are recorded",
                        self.jobs.len()
                    ));
                }
                Ok(())
            }
            ClassState::Divided(_) => match self
                .jobs
                .values()
                .find(|job| job.state != JobStateView::Running)
            {
                Some(job) => mismatch(job.id, job.state),
                None => Ok(()),
            },
        }
    }
}
