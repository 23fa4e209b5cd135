//! CPU time of jobs read at a gang slice switch (the ended quantum's
//! utilisation, `coord::quantum`). A switch reads every coordinator job of
//! the node; per task that was one map lookup, a system call of ~1.7 µs
//! here, ~22 per switch with three OpenMPI jobs (8 tasks each: `setsid`,
//! `sh`, `orted`'s and the rank's threads), all on the CPU of the incoming
//! job. The eBPF side also keeps a per-job counter of completed runs
//! (`JOB_CPU`), so a switch reads one entry per job plus who runs on each
//! of the node's CPUs now (the run under way is not in the counter yet).

use std::collections::BTreeMap;

use cosched_agent_common::CpuSlot;
use cosched_proto::{control::JobState, job::JobId};

use super::Engine;
use crate::kernel::Kernel;

impl<K: Kernel> Engine<K> {
    /// CPU seconds each of `jobs` used so far (a job unknown here is left
    /// out), as [`Engine::job_cpu_seconds`] gives them. A running job with
    /// a per-job counter costs one lookup; one without (the map was full)
    /// is read task by task.
    pub fn jobs_cpu_seconds(
        &self,
        jobs: impl IntoIterator<Item = JobId>,
        now_ns: u64,
    ) -> BTreeMap<JobId, f64> {
        let mut slots: Option<Vec<(u32, CpuSlot)>> = None;
        let mut out = BTreeMap::new();
        for job in jobs {
            let Some(record) = self.reg.job(job) else {
                continue;
            };
            let counted = if record.state == JobState::Running {
                self.k.job_cpu_ns(job).ok().flatten()
            } else {
                None
            };
            let seconds = match counted {
                Some(done_ns) => {
                    let slots = slots.get_or_insert_with(|| {
                        self.k.cpu_slots(&self.node_cpus()).unwrap_or_default()
                    });
                    (done_ns + running_ns(slots, job, now_ns)) as f64 / 1e9
                }
                None => match self.job_cpu_seconds(job, now_ns) {
                    Some(seconds) => seconds,
                    None => continue,
                },
            };
            out.insert(job, seconds);
        }
        out
    }
}

/// The part of `job`'s CPU time in runs under way at `now_ns` (its tasks
/// on the CPUs of `slots`): the per-job counter only has completed runs.
pub fn running_ns(slots: &[(u32, CpuSlot)], job: JobId, now_ns: u64) -> u64 {
    slots
        .iter()
        .filter(|(_, slot)| slot.managed != 0 && slot.job_id == job)
        .map(|(_, slot)| now_ns.saturating_sub(slot.since_ns))
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slot(job_id: u32, managed: bool, since_ns: u64) -> CpuSlot {
        CpuSlot {
            tid: 10,
            job_id,
            managed: u32::from(managed),
            prev_tid: 0,
            since_ns,
        }
    }

    #[test]
    fn only_the_jobs_own_tasks_on_cpu_now_add_their_run_so_far() {
        let slots = [
            (0, slot(7, true, 1_000)),
            (1, slot(8, true, 1_500)),
            (2, slot(7, true, 1_800)),
        ];
        assert_eq!(running_ns(&slots, 7, 2_000), 1_000 + 200);
        assert_eq!(running_ns(&slots, 8, 2_000), 500);
        assert_eq!(running_ns(&slots, 9, 2_000), 0);
    }

    #[test]
    fn an_unmanaged_task_or_an_idle_cpu_adds_nothing() {
        // The agent itself holds the CPU while it reads (unmanaged, job 0).
        let slots = [(0, slot(0, false, 1_000)), (1, CpuSlot::default())];
        assert_eq!(running_ns(&slots, 0, 2_000), 0);
        assert_eq!(running_ns(&slots, 7, 2_000), 0);
    }
}
