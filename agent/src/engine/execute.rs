//! The one executor of realisation plans: applies [`KernelOp`]s to one task
//! through the kernel seam and the restore ledger, and keeps the task's
//! [`Realisation`] in step with what actually happened.
use std::io;

use crate::{cpu_group::CpuGroups, kernel::Kernel, restore::RestoreLedger};

use super::plan::{GroupNice, KernelOp, Realisation, Target, TaskPlan};

/// Applies `plan`'s ops to its task in order and stops at the first
/// failure. Each op that succeeds is recorded in `state` at once (a cgroup
/// move or watch flags that went through stay known even when a later op
/// fails); the level becomes `target`'s only when every op succeeded, so a
/// failed change is tried again at the next realisation. Stop and Cont
/// signal the task's process (a signal stops or continues a whole thread
/// group; [`super::plan::signal_each_process_once`] decides which task of
/// a process carries it).
pub fn execute<K: Kernel>(
    k: &mut K,
    ledger: &mut RestoreLedger,
    groups: Option<&CpuGroups>,
    plan: &TaskPlan,
    state: &mut Realisation,
    target: &Target,
) -> io::Result<()> {
    let (tid, tgid) = (plan.tid, plan.tgid);
    // Whether the task has an autogroup, read once per plan.
    let mut autogroup: Option<bool> = None;
    let mut has_autogroup = |k: &K| -> io::Result<bool> {
        if autogroup.is_none() {
            autogroup = Some(k.group_nice(tid)?.is_some());
        }
        Ok(autogroup == Some(true))
    };
    for op in &plan.ops {
        match *op {
            KernelOp::MoveCgroup(to) => {
                let Some(groups) = groups else { continue };
                let dir = match to {
                    Some(g) => Some(groups.path(g).to_path_buf()),
                    None => match ledger.get(tid).and_then(|e| e.cpu_cgroup.clone()) {
                        Some(original) => Some(original),
                        None => k.cpu_cgroup_root()?,
                    },
                };
                if let Some(dir) = dir {
                    k.set_cpu_cgroup(tid, &dir)?;
                }
                state.group = to;
            }
            KernelOp::SetAttr(attr) => {
                k.set_attr(tid, &attr)?;
                state.attr = attr;
            }
            KernelOp::JournalStop => ledger.will_stop(k, tid)?,
            KernelOp::Stop => k.stop(tgid)?,
            KernelOp::Cont => k.cont(tgid)?,
            KernelOp::JournalGroupNice => {
                if has_autogroup(k)? {
                    ledger.will_set_group_nice(k, tid)?;
                }
            }
            KernelOp::SetGroupNice(nice) => {
                if has_autogroup(k)? {
                    let nice = match nice {
                        GroupNice::Lowest => 19,
                        GroupNice::Original => {
                            ledger.get(tid).and_then(|e| e.group_nice).unwrap_or(0)
                        }
                    };
                    k.set_group_nice(tid, nice)?;
                }
            }
            KernelOp::Watch(flags) => {
                k.watch(tid, flags)?;
                state.watch = flags;
            }
        }
    }
    state.level = target.level;
    Ok(())
}
