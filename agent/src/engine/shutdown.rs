//! Handing everything back: the policy's levels (at a policy switch), and
//! every task the agent changed (at shutdown).
use std::{collections::HashMap, path::PathBuf};

use cosched_policy::local::Level;

use super::Engine;
use crate::{kernel::Kernel, restore::RestoreReport};

impl<K: Kernel> Engine<K> {
    /// Hands every task the policy changed back (policy switch, shutdown).
    pub(super) fn release_policy(&mut self) {
        self.driver.release_all();
        self.apply_policy_actions(None);
        // Anything the policy forgot to hand back is put back here.
        for tid in self.reg.task_ids() {
            if let Some(s) = self.reg.task_mut(tid) {
                s.wanted = None;
            }
            if self
                .reg
                .task(tid)
                .is_some_and(|s| s.realised.level != Level::Normal)
            {
                self.realize(tid, None);
            }
        }
    }

    /// Puts every task the agent changed back to its original attributes and
    /// stops tracking everything.
    pub fn shutdown(&mut self) -> RestoreReport {
        self.gang = None;
        self.class_override = None;
        self.classes_held_off = false;
        let now = self.k.now_ns();
        let band = self.classes_band();
        self.classes.set_mode(None, band, now);
        self.release_policy();
        // Where each process's main thread came from, for the sweep below.
        let process_cgroups: HashMap<u32, PathBuf> = self
            .reg
            .tasks()
            .filter_map(|(tid, s)| {
                let original = self.ledger.get(tid)?.cpu_cgroup.clone()?;
                (tid == s.tgid).then_some((tid, original))
            })
            .collect();
        let mut report = self.ledger.restore_all(&mut self.k);
        self.sweep_cpu_groups(&process_cgroups, &mut report);
        for tid in self.reg.task_ids() {
            let _ = self.k.untrack(tid);
        }
        self.rt_readers.clear();
        let jobs: Vec<_> = self.reg.jobs().map(|j| j.id).collect();
        for job in jobs {
            self.rt_job_ended(job);
        }
        self.release_low_latency();
        for (outcome, n) in [
            ("restored", report.restored),
            ("gone", report.gone),
            ("failed", report.failed.len()),
        ] {
            self.metrics
                .restored
                .with_label_values(&[outcome])
                .inc_by(n as u64);
        }
        report
    }

    /// Belt and braces after the restore: every thread still in the
    /// demotion cgroups (one the ledger did not know, like a thread whose
    /// fork event was lost) goes back to its process's original cgroup, or
    /// to the root of the cpu hierarchy.
    fn sweep_cpu_groups(
        &mut self,
        process_cgroups: &HashMap<u32, PathBuf>,
        report: &mut RestoreReport,
    ) {
        let Some(g) = self.cpu_groups.clone() else {
            return;
        };
        let root = self.k.cpu_cgroup_root().ok().flatten();
        for dir in [&g.idle, &g.active] {
            let tids = match self.k.cpu_cgroup_tasks(dir) {
                Ok(t) => t,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => {
                    report
                        .failed
                        .push((0, format!("listing {}: {e}", dir.display())));
                    continue;
                }
            };
            for tid in tids {
                let target = self
                    .k
                    .tgid(tid)
                    .ok()
                    .and_then(|p| process_cgroups.get(&p).cloned())
                    .or_else(|| root.clone());
                let Some(target) = target else {
                    continue;
                };
                match self.k.set_cpu_cgroup(tid, &target) {
                    Ok(()) => report.restored += 1,
                    Err(e) if e.raw_os_error() == Some(libc::ESRCH) => {}
                    Err(e) => report.failed.push((
                        tid,
                        format!(
                            "moving out of {} to {}: {e}",
                            dir.display(),
                            target.display()
                        ),
                    )),
                }
            }
        }
    }
}
